//! From input bytes to requests: framing, envelope, request identity, admission, execution.

use super::state::{Engine, Output, PendingOp, State};
use crate::caps::{negotiate, Capability};
use crate::encode;
use crate::envelope::{self, Envelope};
use crate::error::{ErrorCode, StopReason};
use crate::framing::{FrameEvent, LineAt};
use crate::ids::{Admit, RequestId};
use crate::methods::{self, Method, Request};
use crate::time::Time;
use crate::worker::WorkerCommand;
use serde_json::json;

impl Engine {
    pub(super) fn pump(&mut self, now: Time) {
        let backlog = std::mem::take(&mut self.backlog);
        while self.backlog_pos < backlog.len() && !self.is_stopping() && self.room() {
            let start = self.backlog_pos;
            let feed = self.decoder.feed(&backlog[start..]);
            self.backlog_pos += feed.consumed;
            match feed.event {
                None => {}
                Some(FrameEvent::Line(LineAt::Input(r))) => {
                    self.handle_line(&backlog[start + r.start..start + r.end], now);
                }
                Some(FrameEvent::Line(LineAt::Buffered)) => {
                    let line = std::mem::take(&mut self.decoder);
                    self.handle_line(line.buffered(), now);
                    self.decoder = line;
                    self.decoder.clear();
                }
                Some(FrameEvent::TooLarge) => {
                    self.respond(None, Err(ErrorCode::FrameTooLarge), now);
                    self.stop(StopReason::FrameTooLarge, now);
                }
            }
        }
        self.backlog = backlog;
        if self.is_stopping() {
            self.backlog.clear();
            self.backlog_pos = 0;
        }
    }

    pub(super) fn handle_line(&mut self, line: &[u8], now: Time) {
        match envelope::parse(line) {
            Err(reject) => {
                if let Some(id) = &reject.id {
                    self.ledger.record(id);
                }
                self.respond(reject.id.as_ref(), Err(reject.code), now);
                if reject.code == ErrorCode::ProtocolMismatch {
                    self.stop(StopReason::ProtocolMismatch, now);
                }
            }
            Ok(env) => match self.ledger.admit(&env.id) {
                Admit::Duplicate => self.respond(Some(&env.id), Err(ErrorCode::DuplicateId), now),
                Admit::LimitReached => {
                    self.respond(Some(&env.id), Err(ErrorCode::RequestLimit), now);
                    self.stop(StopReason::RequestLimit, now);
                }
                Admit::New => self.dispatch(env, now),
            },
        }
    }

    pub(super) fn dispatch(&mut self, env: Envelope, now: Time) {
        let id = env.id.clone();
        match self.admit(&env) {
            Ok(request) => self.execute(id, request, now),
            Err(code) => self.respond(Some(&id), Err(code), now),
        }
    }

    /// Method → initialization state → capability → params.
    pub(super) fn admit(&self, env: &Envelope) -> Result<Request, ErrorCode> {
        let method = Method::parse(&env.method).ok_or(ErrorCode::UnsupportedMethod)?;
        let cap = method.capability();
        match (cap, &self.state) {
            (Capability::Shutdown, _) => {}
            (Capability::Initialize, State::Uninitialized) => {
                if env.nested_duplicates {
                    return Err(ErrorCode::InvalidParams);
                }
                let names = methods::initialize_names(&env.params)?;
                negotiate(&names, self.config.supported)?;
                let client_tools = methods::initialize_client_tools(&env.params, &names)?;
                return Ok(Request::Initialize {
                    required: names.into_iter().map(str::to_owned).collect(),
                    client_tools,
                });
            }
            (Capability::Initialize, _) => return Err(ErrorCode::AlreadyInitialized),
            (_, State::Uninitialized) => return Err(ErrorCode::NotInitialized),
            (Capability::Status, _) => {}
            (_, State::Starting { .. }) => return Err(ErrorCode::NotInitialized),
            (_, State::Failed { code, .. }) => return Err(*code),
            (_, State::Ready(_)) => {
                let admitted = !cap.needs_negotiation() || self.negotiated.contains(cap);
                if !admitted || !self.config.supported.contains(cap) {
                    return Err(ErrorCode::UnsupportedCapability);
                }
            }
            (_, State::Stopping(_)) => return Err(ErrorCode::NotInitialized),
        }
        methods::parse_params(method, &env.params, env.nested_duplicates)
    }

    /// An answer to what the active run asked (`approval.answer`, `client.tool.result`): the
    /// session and run are checked here, the question itself by the worker. Answers with the
    /// error and `None`, or reserves the reply slot and gives the ID back for the command.
    fn admit_answer(
        &mut self,
        id: RequestId,
        session_id: &str,
        run_id: &str,
        stale: ErrorCode,
        now: Time,
    ) -> Option<RequestId> {
        if let Err(code) = self.check_session(session_id) {
            self.respond(Some(&id), Err(code), now);
            None
        } else if self.run.as_deref() == Some(run_id) {
            self.replies.push(id.clone());
            self.reserved += 1;
            Some(id)
        } else {
            self.respond(Some(&id), Err(stale), now);
            None
        }
    }

    pub(super) fn execute(&mut self, id: RequestId, request: Request, now: Time) {
        match request {
            Request::Initialize {
                required,
                client_tools,
            } => self.initialize(id, &required, client_tools),
            Request::Status => self.status(&id, now),
            Request::Shutdown => {
                self.respond(Some(&id), Ok(json!({ "state": "stopping" })), now);
                self.stop(StopReason::Shutdown, now);
            }
            Request::OperationCancel { request_id } => self.cancel_op(&id, &request_id, now),
            Request::TurnStart { session_id, prompt } => {
                self.turn_start(id, session_id, prompt, now);
            }
            Request::TurnCancel { session_id, run_id } => {
                self.turn_cancel(&id, &session_id, run_id, now);
            }
            Request::ApprovalAnswer {
                session_id,
                run_id,
                approval_id,
                allow,
            } => {
                let stale = ErrorCode::StaleApproval;
                if let Some(id) = self.admit_answer(id, &session_id, &run_id, stale, now) {
                    self.outputs
                        .push_back(Output::Worker(WorkerCommand::AnswerApproval {
                            id,
                            run_id,
                            approval_id,
                            allow,
                        }));
                }
            }
            Request::ClientToolResult {
                session_id,
                run_id,
                call_id,
                ok,
                output,
            } => {
                let stale = ErrorCode::StaleCall;
                if let Some(id) = self.admit_answer(id, &session_id, &run_id, stale, now) {
                    self.outputs
                        .push_back(Output::Worker(WorkerCommand::AnswerClientTool {
                            id,
                            run_id,
                            call_id,
                            ok,
                            output,
                        }));
                }
            }
            request => self.start_op(id, request, now),
        }
    }

    fn initialize(
        &mut self,
        id: RequestId,
        required: &[String],
        client_tools: Vec<crate::ClientToolDef>,
    ) {
        let names: Vec<&str> = required.iter().map(String::as_str).collect();
        // Checked in admit; recomputed here to keep the set.
        let Ok(set) = negotiate(&names, self.config.supported) else {
            return;
        };
        self.negotiated = set;
        self.state = State::Starting { init_id: id };
        self.status_cache = None;
        self.reserved += 1;
        let capabilities = set.iter().map(|c| c.as_str().to_owned()).collect();
        self.client_tools = client_tools.iter().map(|t| t.name.clone()).collect();
        self.outputs
            .push_back(Output::Worker(WorkerCommand::StartInit {
                capabilities,
                client_tools,
            }));
    }

    fn status(&mut self, id: &RequestId, now: Time) {
        let raw = match self.status_cache.take() {
            Some(raw) => raw,
            None => serde_json::to_vec(&self.status_value()).unwrap_or_default(),
        };
        let instance = &self.instance_id;
        if self
            .outq
            .push(now, |seq, b| encode::result_raw(b, instance, seq, id, &raw))
            .is_err()
        {
            self.stop(StopReason::QueueOverflow, now);
        }
        self.status_cache = Some(raw);
    }

    fn cancel_op(&mut self, id: &RequestId, request_id: &str, now: Time) {
        match &mut self.op {
            Some(op) if op.id.as_str() == request_id && !op.answered => {
                op.answered = true;
                let target = op.id.clone();
                self.outputs
                    .push_back(Output::Worker(WorkerCommand::CancelOp {
                        id: target.clone(),
                    }));
                self.respond(Some(id), Ok(json!({ "cancellation_requested": true })), now);
                self.reserved -= 1;
                self.respond(Some(&target), Err(ErrorCode::OperationCancelled), now);
            }
            _ => self.respond(Some(id), Err(ErrorCode::StaleOperation), now),
        }
    }

    fn turn_start(&mut self, id: RequestId, session_id: String, prompt: String, now: Time) {
        if let Err(code) = self.check_session(&session_id) {
            self.respond(Some(&id), Err(code), now);
        } else if self.op.is_some() || self.turn.is_some() || self.run.is_some() {
            self.respond(Some(&id), Err(ErrorCode::Busy), now);
        } else {
            self.turn = Some(id.clone());
            self.reserved += 1;
            self.outputs
                .push_back(Output::Worker(WorkerCommand::StartTurn {
                    id,
                    session_id,
                    prompt,
                }));
        }
    }

    fn turn_cancel(&mut self, id: &RequestId, session_id: &str, run_id: String, now: Time) {
        if let Err(code) = self.check_session(session_id) {
            self.respond(Some(id), Err(code), now);
        } else if self.run.as_deref() == Some(run_id.as_str()) {
            self.outputs
                .push_back(Output::Worker(WorkerCommand::CancelRun { run_id }));
            self.respond(Some(id), Ok(json!({ "cancellation_requested": true })), now);
        } else {
            self.respond(Some(id), Err(ErrorCode::StaleRun), now);
        }
    }

    fn start_op(&mut self, id: RequestId, request: Request, now: Time) {
        if self.op.is_some() || self.turn.is_some() || self.run.is_some() {
            self.respond(Some(&id), Err(ErrorCode::Busy), now);
            return;
        }
        self.op = Some(PendingOp {
            id: id.clone(),
            answered: false,
        });
        self.reserved += 1;
        self.outputs
            .push_back(Output::Worker(WorkerCommand::StartOp { id, request }));
    }
}

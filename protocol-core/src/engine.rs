//! The engine: state machine, admission, flow control, stopping.

use crate::caps::{negotiate, Capability, CapabilitySet};
use crate::encode;
use crate::envelope::{self, Envelope};
use crate::error::{ErrorCode, StopReason};
use crate::framing::{FrameEvent, LineAt, LineDecoder};
use crate::ids::{Admit, IdLedger, RequestId};
use crate::limits::{
    self, CLEANUP_WAIT_MS, CLOSING_DEADLINE_MS, PENDING_OUTPUT_FRAMES, READ_BATCH_BYTES,
};
use crate::methods::{self, Method, Request};
use crate::outq::{OutQueue, PushError};
use crate::time::Time;
use crate::worker::{OpOutcome, ReadyView, WorkerCommand, WorkerEvent};
use serde_json::{json, Map, Value};
use std::collections::VecDeque;

/// Static configuration of one engine.
#[derive(Clone, Debug)]
pub struct Config {
    /// Capabilities this build supports: the sixteen base names plus implemented extensions.
    pub supported: CapabilitySet,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            supported: CapabilitySet::base(),
        }
    }
}

/// The phase of a stopping engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopPhase {
    /// Writing out what is queued.
    Draining,
    /// Waiting (at most 2,000 ms) for workers to clean up.
    CleanupWait,
    /// [`Output::Exit`] was emitted.
    Exited,
}

/// Details of [`State::Stopping`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopping {
    /// Why the engine stops.
    pub reason: StopReason,
    /// Where it is.
    pub phase: StopPhase,
    /// The exit code it will report.
    pub exit: i32,
    closing_deadline: Option<Time>,
    cleanup_deadline: Option<Time>,
}

/// The engine's explicit state.
#[derive(Clone, Debug, PartialEq)]
pub enum State {
    /// No initialization admitted yet.
    Uninitialized,
    /// The initialization worker runs.
    Starting {
        /// The `initialize` request awaiting its response.
        init_id: RequestId,
    },
    /// Initialization succeeded.
    Ready(ReadyView),
    /// Initialization failed; `status` reports the code and session methods return it.
    Failed {
        /// The safe startup error code.
        code: ErrorCode,
        /// What was known before the failure.
        provider: Option<String>,
        /// What was known before the failure.
        model: Option<String>,
        /// What was known before the failure.
        context_id: Option<String>,
    },
    /// No more input is admitted; output drains, workers clean up, then the child exits.
    Stopping(Stopping),
}

/// A non-byte effect for the driver.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Output {
    /// Hand this to the backend.
    Worker(WorkerCommand),
    /// Exit the process with this code (after restoring the pipes' flags).
    Exit {
        /// The exit status.
        code: i32,
    },
}

#[derive(Debug)]
struct PendingOp {
    id: RequestId,
    /// Already answered (`operation_cancelled`); the slot stays busy until the worker reports.
    answered: bool,
}

/// The sans-IO protocol engine. See the crate docs for the run-loop contract.
#[derive(Debug)]
pub struct Engine {
    config: Config,
    instance_id: String,
    state: State,
    decoder: LineDecoder,
    backlog: Vec<u8>,
    backlog_pos: usize,
    ledger: IdLedger,
    outq: OutQueue,
    outputs: VecDeque<Output>,
    /// Output slots promised to requests whose responses come later.
    reserved: usize,
    negotiated: CapabilitySet,
    op: Option<PendingOp>,
    eof: bool,
    incomplete_pending: bool,
    /// The serialized `status` result, rebuilt only when state or view changes: `status` is
    /// the hot path of a polling client.
    status_cache: Option<Vec<u8>>,
    /// A `turn.start` awaiting admission.
    turn: Option<RequestId>,
    /// The active run.
    run: Option<String>,
    /// Requests answered by [`WorkerEvent::Reply`] (each holds a reserved slot).
    replies: Vec<RequestId>,
    /// A critical run event waiting for output room; no other worker event is taken meanwhile.
    held: Option<WorkerEvent>,
}

impl Engine {
    /// A new engine for one child. `instance_id` is a fresh UUID drawn by the driver.
    #[must_use]
    pub fn new(config: Config, instance_id: &str, _now: Time) -> Self {
        Self {
            config,
            instance_id: instance_id.to_owned(),
            state: State::Uninitialized,
            decoder: LineDecoder::new(),
            backlog: Vec::with_capacity(READ_BATCH_BYTES),
            backlog_pos: 0,
            ledger: IdLedger::new(),
            outq: OutQueue::new(),
            outputs: VecDeque::new(),
            reserved: 0,
            negotiated: CapabilitySet::EMPTY,
            op: None,
            eof: false,
            incomplete_pending: false,
            status_cache: None,
            turn: None,
            run: None,
            replies: Vec::new(),
            held: None,
        }
    }

    /// The current state.
    #[must_use]
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The instance ID every frame carries.
    #[must_use]
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// Whether the driver may read one more batch (at most 4,096 bytes) for [`Self::handle_input`].
    #[must_use]
    pub fn wants_input(&self) -> bool {
        !self.is_stopping() && !self.eof && self.backlog_pos >= self.backlog.len()
    }

    /// Whether the driver may hand over another worker event (false while a critical event
    /// waits for output room, so the bounded channel pushes back on the worker).
    #[must_use]
    pub fn accepts_worker_event(&self) -> bool {
        self.held.is_none()
    }

    /// The active run, if any.
    #[must_use]
    pub fn active_run(&self) -> Option<&str> {
        self.run.as_deref()
    }

    /// Bytes held: the partial frame plus the unparsed rest of the last batch.
    #[must_use]
    pub fn buffered_input(&self) -> usize {
        self.decoder.buffered_len() + (self.backlog.len() - self.backlog_pos)
    }

    /// Frames queued and not completely written.
    #[must_use]
    pub fn queued_frames(&self) -> usize {
        self.outq.len()
    }

    /// Feeds one read batch. Call only when [`Self::wants_input`] is true.
    pub fn handle_input(&mut self, bytes: &[u8], now: Time) {
        if !self.wants_input() || bytes.is_empty() {
            return;
        }
        // A batch larger than the contract's 4,096 bytes is cut: the driver promised not to.
        let bytes = &bytes[..bytes.len().min(READ_BATCH_BYTES)];
        self.backlog.clear();
        self.backlog.extend_from_slice(bytes);
        self.backlog_pos = 0;
        self.pump(now);
    }

    /// Input reached EOF.
    pub fn handle_eof(&mut self, now: Time) {
        if self.is_stopping() || self.eof {
            return;
        }
        self.eof = true;
        // The rest of a batch is still parsed first; the driver reads EOF only once the
        // backlog is empty, so the partial frame is the last thing the client sent.
        self.pump(now);
        if self.decoder.finish() {
            self.incomplete_pending = true;
        }
        self.stop(StopReason::Eof, now);
        self.flush_incomplete(now);
        self.check_drained(now);
    }

    /// A worker reported something.
    pub fn handle_worker_event(&mut self, ev: WorkerEvent, now: Time) {
        match ev {
            WorkerEvent::InitReady { view } => {
                let State::Starting { init_id } = &self.state else {
                    return;
                };
                let id = init_id.clone();
                self.state = State::Ready(view);
                self.status_cache = None;
                let result = json!({
                    "capabilities": self.capability_names(),
                    "limits": self.limits_object(),
                    "status": self.status_value(),
                });
                self.reserved -= 1;
                self.respond(Some(&id), Ok(result), now);
            }
            WorkerEvent::InitFailed {
                code,
                provider,
                model,
                context_id,
            } => {
                let State::Starting { init_id } = &self.state else {
                    return;
                };
                let id = init_id.clone();
                let code = if code.is_startup() && code != ErrorCode::StartupCancelled {
                    code
                } else {
                    ErrorCode::StartupFailed
                };
                self.state = State::Failed {
                    code,
                    provider,
                    model,
                    context_id,
                };
                self.reserved -= 1;
                self.respond(Some(&id), Err(code), now);
            }
            WorkerEvent::OpDone { id, outcome, view } => {
                let Some(op) = self.op.take_if(|op| op.id == id) else {
                    return;
                };
                if let (Some(view), State::Ready(current)) = (view, &mut self.state) {
                    *current = view;
                    self.status_cache = None;
                }
                if !op.answered {
                    self.reserved -= 1;
                    let out = match outcome {
                        OpOutcome::Result(v) => Ok(v),
                        OpOutcome::Error(c) => Err(c),
                    };
                    self.respond(Some(&id), out, now);
                }
                self.pump(now);
            }
            WorkerEvent::TurnAdmitted { id, run_id } => {
                if self.turn.as_ref() == Some(&id) {
                    self.turn = None;
                    self.reserved -= 1;
                    self.respond(
                        Some(&id),
                        Ok(json!({ "run_id": run_id, "accepted": true })),
                        now,
                    );
                    self.run = Some(run_id);
                    self.status_cache = None;
                } else if self.is_stopping() && self.run.is_none() {
                    // Admitted after shutdown answered it: the run still owes its terminal.
                    self.run = Some(run_id.clone());
                    self.outputs
                        .push_back(Output::Worker(WorkerCommand::CancelRun { run_id }));
                }
            }
            WorkerEvent::TurnRejected { id, code } => {
                if self.turn.as_ref() == Some(&id) {
                    self.turn = None;
                    self.reserved -= 1;
                    self.respond(Some(&id), Err(code), now);
                }
            }
            ev @ (WorkerEvent::RunEvent { .. } | WorkerEvent::RunFinished { .. }) => {
                self.run_event(ev, now)
            }
            WorkerEvent::Reply { id, outcome } => {
                if let Some(i) = self.replies.iter().position(|r| *r == id) {
                    self.replies.swap_remove(i);
                    self.reserved -= 1;
                    let out = match outcome {
                        OpOutcome::Result(v) => Ok(v),
                        OpOutcome::Error(c) => Err(c),
                    };
                    self.respond(Some(&id), out, now);
                }
            }
            WorkerEvent::CleanupDone => {
                if let State::Stopping(s) = &self.state {
                    if s.phase == StopPhase::CleanupWait {
                        self.exit(now);
                    }
                }
            }
        }
        self.check_drained(now);
    }

    fn run_event(&mut self, ev: WorkerEvent, now: Time) {
        let (run_id, critical) = match &ev {
            WorkerEvent::RunEvent {
                run_id, critical, ..
            } => (run_id, *critical),
            WorkerEvent::RunFinished { run_id, .. } => (run_id, true),
            _ => return,
        };
        if self.run.as_ref() != Some(run_id) {
            return;
        }
        if self.held.is_some() || !self.room() {
            if critical && self.held.is_none() {
                self.held = Some(ev);
            }
            // A best-effort delta is dropped before it gets a seq (`decisions.md` 2).
            return;
        }
        let instance = &self.instance_id;
        let pushed = match &ev {
            WorkerEvent::RunEvent { name, data, .. } => self
                .outq
                .push(now, |seq, b| encode::event(b, instance, seq, name, data)),
            WorkerEvent::RunFinished { data, .. } => self.outq.push(now, |seq, b| {
                encode::event(b, instance, seq, "run.finished", data)
            }),
            _ => return,
        };
        if pushed.is_err() {
            // Events are built bounded by the runner; one that cannot fit is a lost critical
            // delivery, which ends the connection rather than the promise.
            self.stop(StopReason::QueueOverflow, now);
            return;
        }
        if let WorkerEvent::RunFinished { view, .. } = ev {
            self.run = None;
            if let (Some(view), State::Ready(current)) = (view, &mut self.state) {
                *current = view;
            }
            self.status_cache = None;
        }
    }

    fn flush_held(&mut self, now: Time) {
        if self.held.is_some() && self.room() {
            if let Some(ev) = self.held.take() {
                self.run_event(ev, now);
            }
        }
    }

    /// The writer accepted `n` bytes of [`Self::pending_write`].
    pub fn handle_written(&mut self, n: usize, now: Time) {
        self.outq.written(n);
        self.flush_held(now);
        self.pump(now);
        self.flush_incomplete(now);
        self.check_drained(now);
    }

    /// Writing output failed (EPIPE or another error): stop with exit 1.
    pub fn handle_output_error(&mut self, now: Time) {
        self.stop(StopReason::OutputBroken, now);
    }

    /// Time passed; spurious calls are harmless.
    pub fn handle_timeout(&mut self, now: Time) {
        if self.outq.oldest_deadline().is_some_and(|d| d <= now) {
            self.stop(StopReason::OutputDeadline, now);
        }
        let State::Stopping(s) = &mut self.state else {
            return;
        };
        match s.phase {
            StopPhase::Draining if s.closing_deadline.is_some_and(|d| d <= now) => {
                s.exit = 1;
                self.outq.abandon();
                self.begin_cleanup(now);
            }
            StopPhase::CleanupWait if s.cleanup_deadline.is_some_and(|d| d <= now) => {
                self.exit(now)
            }
            _ => {}
        }
    }

    /// The unwritten output bytes, oldest frame first.
    #[must_use]
    pub fn pending_write(&self) -> Option<&[u8]> {
        match &self.state {
            State::Stopping(s) if s.phase != StopPhase::Draining => None,
            _ => self.outq.pending(),
        }
    }

    /// The next non-byte effect.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When [`Self::handle_timeout`] must next be called.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut t = self.outq.oldest_deadline();
        if let State::Stopping(s) = &self.state {
            if s.phase == StopPhase::Exited {
                return None;
            }
            for d in [s.closing_deadline, s.cleanup_deadline]
                .into_iter()
                .flatten()
            {
                t = Some(t.map_or(d, |t| t.min(d)));
            }
        }
        t
    }

    fn is_stopping(&self) -> bool {
        matches!(self.state, State::Stopping(_))
    }

    fn room(&self) -> bool {
        self.outq.len() + self.reserved < PENDING_OUTPUT_FRAMES
    }

    fn pump(&mut self, now: Time) {
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

    fn handle_line(&mut self, line: &[u8], now: Time) {
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

    fn dispatch(&mut self, env: Envelope, now: Time) {
        let id = env.id.clone();
        match self.admit(&env) {
            Ok(request) => self.execute(id, request, now),
            Err(code) => self.respond(Some(&id), Err(code), now),
        }
    }

    /// Method → initialization state → capability → params.
    fn admit(&self, env: &Envelope) -> Result<Request, ErrorCode> {
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
                return Ok(Request::Initialize {
                    required: names.into_iter().map(str::to_owned).collect(),
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

    fn execute(&mut self, id: RequestId, request: Request, now: Time) {
        match request {
            Request::Initialize { required } => {
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
                self.outputs
                    .push_back(Output::Worker(WorkerCommand::StartInit { capabilities }));
            }
            Request::Status => {
                let raw = match self.status_cache.take() {
                    Some(raw) => raw,
                    None => serde_json::to_vec(&self.status_value()).unwrap_or_default(),
                };
                let instance = &self.instance_id;
                if self
                    .outq
                    .push(now, |seq, b| {
                        encode::result_raw(b, instance, seq, &id, &raw)
                    })
                    .is_err()
                {
                    self.stop(StopReason::QueueOverflow, now);
                }
                self.status_cache = Some(raw);
            }
            Request::Shutdown => {
                self.respond(Some(&id), Ok(json!({ "state": "stopping" })), now);
                self.stop(StopReason::Shutdown, now);
            }
            Request::OperationCancel { request_id } => match &mut self.op {
                Some(op) if op.id.as_str() == request_id && !op.answered => {
                    op.answered = true;
                    let target = op.id.clone();
                    self.outputs
                        .push_back(Output::Worker(WorkerCommand::CancelOp {
                            id: target.clone(),
                        }));
                    self.respond(
                        Some(&id),
                        Ok(json!({ "cancellation_requested": true })),
                        now,
                    );
                    self.reserved -= 1;
                    self.respond(Some(&target), Err(ErrorCode::OperationCancelled), now);
                }
                _ => self.respond(Some(&id), Err(ErrorCode::StaleOperation), now),
            },
            Request::TurnStart { session_id, prompt } => {
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
            Request::TurnCancel { session_id, run_id } => {
                if let Err(code) = self.check_session(&session_id) {
                    self.respond(Some(&id), Err(code), now);
                } else if self.run.as_deref() == Some(run_id.as_str()) {
                    self.outputs
                        .push_back(Output::Worker(WorkerCommand::CancelRun { run_id }));
                    self.respond(
                        Some(&id),
                        Ok(json!({ "cancellation_requested": true })),
                        now,
                    );
                } else {
                    self.respond(Some(&id), Err(ErrorCode::StaleRun), now);
                }
            }
            Request::ApprovalAnswer {
                session_id,
                run_id,
                approval_id,
                allow,
            } => {
                if let Err(code) = self.check_session(&session_id) {
                    self.respond(Some(&id), Err(code), now);
                } else if self.run.as_deref() == Some(run_id.as_str()) {
                    self.replies.push(id.clone());
                    self.reserved += 1;
                    self.outputs
                        .push_back(Output::Worker(WorkerCommand::AnswerApproval {
                            id,
                            run_id,
                            approval_id,
                            allow,
                        }));
                } else {
                    self.respond(Some(&id), Err(ErrorCode::StaleApproval), now);
                }
            }
            request => {
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
    }

    /// The attachment check every turn method starts with (`decisions.md` 29).
    fn check_session(&self, session_id: &str) -> Result<(), ErrorCode> {
        let State::Ready(view) = &self.state else {
            return Err(ErrorCode::NotInitialized);
        };
        match view.session_id.as_deref() {
            None => Err(ErrorCode::SessionMissing),
            Some(s) if s == session_id => Ok(()),
            Some(_) => Err(ErrorCode::StaleSession),
        }
    }

    fn respond(&mut self, id: Option<&RequestId>, out: Result<Value, ErrorCode>, now: Time) {
        let instance = &self.instance_id;
        let pushed = match &out {
            Ok(v) => self.outq.push(now, |seq, b| {
                encode::result(b, instance, seq, id.expect("results always carry an id"), v)
            }),
            Err(c) => self
                .outq
                .push(now, |seq, b| encode::error(b, instance, seq, id, *c)),
        };
        match pushed {
            Ok(_) => {}
            Err(PushError::TooLarge) => {
                // A result that cannot fit one frame is reported as such, never cut.
                let r = self.outq.push(now, |seq, b| {
                    encode::error(b, instance, seq, id, ErrorCode::ContentLimit)
                });
                if r.is_err() {
                    self.stop(StopReason::QueueOverflow, now);
                }
            }
            Err(PushError::Overflow) => self.stop(StopReason::QueueOverflow, now),
        }
    }

    fn capability_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&str> = Capability::BASE.iter().map(|c| c.as_str()).collect();
        for c in [Capability::ToolCards, Capability::ClientTools] {
            if self.negotiated.contains(c) {
                names.push(c.as_str());
            }
        }
        names
    }

    fn limits_object(&self) -> Value {
        let mut m = Map::new();
        let discover: &[(&str, u64)] = if self.negotiated.contains(Capability::SessionDiscover) {
            limits::DISCOVER_ADVERTISED
        } else {
            &[]
        };
        for (k, v) in limits::ADVERTISED.iter().chain(discover) {
            m.insert((*k).to_owned(), Value::from(*v));
        }
        Value::Object(m)
    }

    /// The `status` result for the current state.
    #[must_use]
    pub fn status_value(&self) -> Value {
        match &self.state {
            State::Ready(v) => json!({
                "state": if self.run.is_some() { "running" } else { "idle" },
                "readiness": "ready",
                "provider": v.provider,
                "model": v.model,
                "context_id": v.context_id,
                "session_id": v.session_id,
                "run_id": self.run,
                "selection": v.selection,
            }),
            State::Failed {
                code,
                provider,
                model,
                context_id,
            } => json!({
                "state": "failed",
                "readiness": code.as_str(),
                "provider": provider,
                "model": model,
                "context_id": context_id,
                "session_id": null,
                "run_id": null,
                "selection": null,
            }),
            _ => json!({
                "state": "starting",
                "readiness": "initializing",
                "provider": null,
                "model": null,
                "context_id": null,
                "session_id": null,
                "run_id": null,
                "selection": null,
            }),
        }
    }

    fn stop(&mut self, reason: StopReason, now: Time) {
        let fatal_output = matches!(
            reason,
            StopReason::OutputBroken | StopReason::OutputDeadline | StopReason::QueueOverflow
        );
        if let State::Stopping(s) = &mut self.state {
            // Already stopping: only a dead output changes the outcome.
            if fatal_output && s.phase == StopPhase::Draining {
                s.exit = 1;
                s.reason = reason;
                self.outq.abandon();
                self.incomplete_pending = false;
                self.begin_cleanup(now);
            }
            return;
        }
        let previous = std::mem::replace(
            &mut self.state,
            State::Stopping(Stopping {
                reason,
                phase: StopPhase::Draining,
                exit: match reason {
                    StopReason::Shutdown | StopReason::Eof => 0,
                    _ => 1,
                },
                // EOF always drains under the closing deadline; any stop that must wait for a run
                // terminal gets the same bound.
                closing_deadline: (reason == StopReason::Eof
                    || self.run.is_some()
                    || self.turn.is_some())
                .then(|| now.plus_ms(CLOSING_DEADLINE_MS)),
                cleanup_deadline: None,
            }),
        );
        if let State::Starting { init_id } = previous {
            self.outputs
                .push_back(Output::Worker(WorkerCommand::CancelStartup));
            self.reserved -= 1;
            if !fatal_output {
                self.respond(Some(&init_id), Err(ErrorCode::StartupCancelled), now);
            }
        }
        if let Some(op) = &mut self.op {
            if !op.answered {
                op.answered = true;
                let target = op.id.clone();
                self.outputs
                    .push_back(Output::Worker(WorkerCommand::CancelOp {
                        id: target.clone(),
                    }));
                self.reserved -= 1;
                if !fatal_output {
                    self.respond(Some(&target), Err(ErrorCode::OperationCancelled), now);
                }
            }
        }
        // A turn awaiting admission is cancelled but still answered by its worker; an active
        // run is cancelled and still owes its terminal event, which draining waits for.
        if let Some(turn) = &self.turn {
            self.outputs
                .push_back(Output::Worker(WorkerCommand::CancelOp { id: turn.clone() }));
        }
        if let Some(run_id) = &self.run {
            self.outputs
                .push_back(Output::Worker(WorkerCommand::CancelRun {
                    run_id: run_id.clone(),
                }));
        }
        if fatal_output {
            self.outq.abandon();
            self.incomplete_pending = false;
            self.held = None;
            self.begin_cleanup(now);
        }
    }

    fn flush_incomplete(&mut self, now: Time) {
        if self.incomplete_pending && self.outq.len() < PENDING_OUTPUT_FRAMES {
            self.incomplete_pending = false;
            self.respond(None, Err(ErrorCode::IncompleteFrame), now);
        }
    }

    fn check_drained(&mut self, now: Time) {
        if let State::Stopping(s) = &self.state {
            let run_done = self.run.is_none() && self.turn.is_none() && self.held.is_none();
            if s.phase == StopPhase::Draining
                && self.outq.is_empty()
                && !self.incomplete_pending
                && run_done
            {
                self.begin_cleanup(now);
            }
        }
    }

    fn begin_cleanup(&mut self, now: Time) {
        if let State::Stopping(s) = &mut self.state {
            if s.phase == StopPhase::Draining {
                s.phase = StopPhase::CleanupWait;
                s.closing_deadline = None;
                s.cleanup_deadline = Some(now.plus_ms(CLEANUP_WAIT_MS));
                self.outputs
                    .push_back(Output::Worker(WorkerCommand::Cleanup));
            }
        }
    }

    fn exit(&mut self, _now: Time) {
        if let State::Stopping(s) = &mut self.state {
            if s.phase != StopPhase::Exited {
                s.phase = StopPhase::Exited;
                s.cleanup_deadline = None;
                self.outputs.push_back(Output::Exit { code: s.exit });
            }
        }
    }
}

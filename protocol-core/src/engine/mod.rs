//! The engine: state machine, admission, flow control, stopping.
//!
//! This file holds the types and the driver-facing `handle_*`/`poll_*` surface; the children
//! split the internals by concern.

mod admit;
mod runs;
mod slots;
mod status;
mod stop;
mod timer;

use crate::caps::{Capability, CapabilitySet};
use crate::error::{ErrorCode, StopReason};
use crate::framing::LineDecoder;
use crate::ids::{IdLedger, RequestId};
use crate::limits::READ_BATCH_BYTES;
use crate::outq::OutQueue;
use crate::time::Time;
use crate::worker::{OpOutcome, ReadyView, WorkerCommand, WorkerEvent};
use serde_json::json;
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
            supported: CapabilitySet::base().with(Capability::ToolCards),
        }
    }
}

/// The phase of a stopping engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopPhase {
    /// Writing out what is queued.
    Draining,
    /// Waiting (at most [`CLEANUP_WAIT_MS`](crate::limits::CLEANUP_WAIT_MS)) for workers to
    /// clean up.
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
    /// The names of the registered `client.tools` tools, for the `extensions` member.
    client_tools: Vec<String>,
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
            client_tools: Vec::new(),
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

    /// Whether the driver may read one more batch (at most [`READ_BATCH_BYTES`]) for
    /// [`Self::handle_input`].
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
        // A batch larger than the contract's READ_BATCH_BYTES is cut: the driver promised not to.
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
            WorkerEvent::InitReady { view } => self.init_ready(view, now),
            WorkerEvent::InitFailed {
                code,
                provider,
                model,
                context_id,
            } => self.init_failed(code, provider, model, context_id, now),
            WorkerEvent::OpDone { id, outcome, view } => self.op_done(&id, outcome, view, now),
            WorkerEvent::TurnAdmitted { id, run_id } => self.turn_admitted(&id, run_id, now),
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
                    self.respond(Some(&id), outcome.into_result(), now);
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

    fn init_ready(&mut self, view: ReadyView, now: Time) {
        let State::Starting { init_id } = &self.state else {
            return;
        };
        let id = init_id.clone();
        self.state = State::Ready(view);
        self.status_cache = None;
        let result = self.initialize_result();
        self.reserved -= 1;
        self.respond(Some(&id), Ok(result), now);
    }

    fn init_failed(
        &mut self,
        code: ErrorCode,
        provider: Option<String>,
        model: Option<String>,
        context_id: Option<String>,
        now: Time,
    ) {
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

    fn op_done(&mut self, id: &RequestId, outcome: OpOutcome, view: Option<ReadyView>, now: Time) {
        let Some(op) = self.op.take_if(|op| op.id == *id) else {
            return;
        };
        if let (Some(view), State::Ready(current)) = (view, &mut self.state) {
            *current = view;
            self.status_cache = None;
        }
        if !op.answered {
            self.reserved -= 1;
            self.respond(Some(id), outcome.into_result(), now);
        }
        self.pump(now);
    }

    fn turn_admitted(&mut self, id: &RequestId, run_id: String, now: Time) {
        if self.turn.as_ref() == Some(id) {
            self.turn = None;
            self.reserved -= 1;
            self.respond(
                Some(id),
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
        self.expire(now);
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
        self.next_deadline()
    }
}

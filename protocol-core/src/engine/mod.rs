//! The engine: state machine, admission, flow control, stopping.
//!
//! This file holds the driver-facing `handle_*`/`poll_*` surface; `state.rs` the types, and
//! the other children split the internals by concern.

mod admit;
mod runs;
mod slots;
mod state;
mod status;
mod stop;
mod timer;

pub use state::{Config, Engine, Output, State, StopPhase, Stopping};

use crate::caps::CapabilitySet;
use crate::error::{ErrorCode, StopReason};
use crate::framing::LineDecoder;
use crate::ids::{IdLedger, RequestId};
use crate::limits::READ_BATCH_BYTES;
use crate::outq::OutQueue;
use crate::time::Time;
use crate::worker::{OpOutcome, ReadyView, WorkerCommand, WorkerEvent};
use serde_json::json;
use std::collections::VecDeque;

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

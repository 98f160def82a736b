//! The engine's types: its configuration, explicit state, outputs and the fields every part
//! of it reads (`engine/mod.rs` holds the driver-facing surface, the siblings the internals).

use crate::caps::{Capability, CapabilitySet};
use crate::error::{ErrorCode, StopReason};
use crate::framing::LineDecoder;
use crate::ids::{IdLedger, RequestId};
use crate::outq::OutQueue;
use crate::time::Time;
use crate::worker::{ReadyView, WorkerCommand, WorkerEvent};
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
    pub(super) closing_deadline: Option<Time>,
    pub(super) cleanup_deadline: Option<Time>,
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
pub(super) struct PendingOp {
    pub(super) id: RequestId,
    /// Already answered (`operation_cancelled`); the slot stays busy until the worker reports.
    pub(super) answered: bool,
}

/// The sans-IO protocol engine. See the crate docs for the run-loop contract.
#[derive(Debug)]
pub struct Engine {
    pub(super) config: Config,
    pub(super) instance_id: String,
    pub(super) state: State,
    pub(super) decoder: LineDecoder,
    pub(super) backlog: Vec<u8>,
    pub(super) backlog_pos: usize,
    pub(super) ledger: IdLedger,
    pub(super) outq: OutQueue,
    pub(super) outputs: VecDeque<Output>,
    /// Output slots promised to requests whose responses come later.
    pub(super) reserved: usize,
    pub(super) negotiated: CapabilitySet,
    /// The names of the registered `client.tools` tools, for the `extensions` member.
    pub(super) client_tools: Vec<String>,
    pub(super) op: Option<PendingOp>,
    pub(super) eof: bool,
    pub(super) incomplete_pending: bool,
    /// The serialized `status` result, rebuilt only when state or view changes: `status` is
    /// the hot path of a polling client.
    pub(super) status_cache: Option<Vec<u8>>,
    /// A `turn.start` awaiting admission.
    pub(super) turn: Option<RequestId>,
    /// The active run.
    pub(super) run: Option<String>,
    /// Requests answered by [`WorkerEvent::Reply`] (each holds a reserved slot).
    pub(super) replies: Vec<RequestId>,
    /// A critical run event waiting for output room; no other worker event is taken meanwhile.
    pub(super) held: Option<WorkerEvent>,
}

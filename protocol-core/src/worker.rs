//! Commands the engine gives workers and the events workers send back.
//!
//! Payloads are plain JSON values, so the engine does not depend on the runner; both types
//! serialize for traces.

use crate::client_tools::ClientToolDef;
use crate::error::ErrorCode;
use crate::ids::RequestId;
use crate::methods::Request;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Work the driver must hand to the backend.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum WorkerCommand {
    /// Start the one initialization worker with the negotiated capability names.
    StartInit {
        /// Negotiated capability names, protocol order.
        capabilities: Vec<String>,
        /// The `client.tools` definitions, validated; empty unless negotiated.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        client_tools: Vec<ClientToolDef>,
    },
    /// Cancel a pending initialization (its request was already answered `startup_cancelled`).
    CancelStartup,
    /// Start an operation on the backend (the session/history worker for session methods).
    StartOp {
        /// The request ID; the outcome is reported with it.
        id: RequestId,
        /// The validated request.
        request: Request,
    },
    /// Cancel an operation started with [`WorkerCommand::StartOp`].
    CancelOp {
        /// The operation's request ID.
        id: RequestId,
    },
    /// Admit and run a turn on the attached session; answer [`WorkerEvent::TurnAdmitted`] or
    /// [`WorkerEvent::TurnRejected`], then stream [`WorkerEvent::RunEvent`]s and end with
    /// [`WorkerEvent::RunFinished`].
    StartTurn {
        /// The `turn.start` request ID.
        id: RequestId,
        /// The attached session (already checked by the engine).
        session_id: String,
        /// The prompt (bounds already checked).
        prompt: String,
    },
    /// Cancel the active run (idempotent); its terminal event still follows.
    CancelRun {
        /// The run.
        run_id: String,
    },
    /// Record an approval answer; answer with [`WorkerEvent::Reply`].
    AnswerApproval {
        /// The `approval.answer` request ID.
        id: RequestId,
        /// The active run.
        run_id: String,
        /// The approval.
        approval_id: String,
        /// The decision.
        allow: bool,
    },
    /// Record a `client.tool.result` (session and run already checked); answer with
    /// [`WorkerEvent::Reply`] (`stale_call` for an unknown, answered or closed call).
    AnswerClientTool {
        /// The `client.tool.result` request ID.
        id: RequestId,
        /// The active run.
        run_id: String,
        /// The call.
        call_id: String,
        /// Whether the client's tool succeeded.
        ok: bool,
        /// Its output (bound already checked).
        output: String,
    },
    /// Stop everything and release resources; answer [`WorkerEvent::CleanupDone`].
    Cleanup,
}

/// What `status` reports once ready; replaced as a whole by workers that change it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadyView {
    /// Effective provider (bounded, `None` if unsafe).
    pub provider: Option<String>,
    /// Effective model (bounded, `None` if unsafe).
    pub model: Option<String>,
    /// Context identity: 64 lowercase hex characters.
    pub context_id: String,
    /// The attached session, if any.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The selection object of `status.selection`.
    pub selection: Value,
}

/// The outcome of one operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpOutcome {
    /// The `result` object.
    Result(Value),
    /// A code-only error.
    Error(ErrorCode),
}

impl OpOutcome {
    /// The response's result or error.
    pub fn into_result(self) -> Result<Value, ErrorCode> {
        match self {
            Self::Result(v) => Ok(v),
            Self::Error(c) => Err(c),
        }
    }
}

/// Something a worker reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum WorkerEvent {
    /// Initialization finished and the child is ready.
    InitReady {
        /// What `status` now reports.
        view: ReadyView,
    },
    /// Initialization failed with a startup code.
    InitFailed {
        /// A startup error code; others are reported as `startup_failed`.
        code: ErrorCode,
        /// Provider, if it was resolved before the failure.
        #[serde(default)]
        provider: Option<String>,
        /// Model, if it was resolved before the failure.
        #[serde(default)]
        model: Option<String>,
        /// Context identity, if it was computed before the failure.
        #[serde(default)]
        context_id: Option<String>,
    },
    /// An operation finished.
    OpDone {
        /// The operation's request ID.
        id: RequestId,
        /// Its outcome.
        outcome: OpOutcome,
        /// A new `status` view, when the operation changed attachment or selection.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        view: Option<ReadyView>,
    },
    /// A turn was admitted: the `turn.start` response, then the run is active.
    TurnAdmitted {
        /// The `turn.start` request ID.
        id: RequestId,
        /// The run-scoped UUID.
        run_id: String,
    },
    /// A turn was refused before any event.
    TurnRejected {
        /// The `turn.start` request ID.
        id: RequestId,
        /// The error code.
        code: ErrorCode,
    },
    /// One live event of the active run (`data` carries `session_id` and `run_id`).
    RunEvent {
        /// The run.
        run_id: String,
        /// The event name (`message.delta`, `activity`, …).
        name: String,
        /// The event data.
        data: Value,
        /// Critical events wait for output room; best-effort ones are dropped without a `seq`.
        critical: bool,
    },
    /// The run ended after worker and cleanup accounting: emits `run.finished` and ends it.
    RunFinished {
        /// The run.
        run_id: String,
        /// The `run.finished` data.
        data: Value,
        /// A new `status` view (history revision, selection), if it changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        view: Option<ReadyView>,
    },
    /// The answer to a request that does not own a worker slot (`approval.answer`).
    Reply {
        /// The request ID.
        id: RequestId,
        /// Its outcome.
        outcome: OpOutcome,
    },
    /// Every worker stopped and resources were released.
    CleanupDone,
}

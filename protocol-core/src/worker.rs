//! Commands the engine gives workers and the events workers send back.
//!
//! Payloads are plain JSON values, so the engine does not depend on the runner; both types
//! serialize for traces.

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
    /// Every worker stopped and resources were released.
    CleanupDone,
}

//! Operations on the session/history worker. Sessions, history, discovery, catalog and
//! selection arrive with later issues; until then each answers a code-only error.

use crate::backend::Shared;
use crate::cancel::Cancel;
use protocol_core::{ErrorCode, ReadyView, Request};
use serde_json::Value;

/// Runs one operation: a result with an optional new status view, or an error code.
pub fn run(
    _shared: &Shared,
    cancel: &Cancel,
    _request: &Request,
) -> Result<(Value, Option<ReadyView>), ErrorCode> {
    if cancel.is_cancelled() {
        return Err(ErrorCode::OperationCancelled);
    }
    Err(ErrorCode::UnsupportedMethod)
}

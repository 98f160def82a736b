//! Operations on the session/history worker.

use crate::backend::Shared;
use crate::cancel::Cancel;
use crate::sessions;
use protocol_core::{ErrorCode, ReadyView, Request};
use serde_json::Value;
use std::sync::PoisonError;

/// Runs one operation: a result with an optional new status view, or an error code.
pub fn run(
    shared: &Shared,
    cancel: &Cancel,
    request: &Request,
) -> Result<(Value, Option<ReadyView>), ErrorCode> {
    if cancel.is_cancelled() {
        return Err(ErrorCode::OperationCancelled);
    }
    let rt = shared
        .runtime
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let Some(rt) = rt else {
        return Err(ErrorCode::StartupFailed);
    };
    let mut st = shared
        .sessions
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    match request {
        Request::SessionCreate => sessions::create(&rt, &mut st),
        Request::SessionOpen { session_id } => sessions::open(&rt, &mut st, session_id, cancel),
        Request::HistoryPage {
            session_id,
            revision,
            cursor,
        } => sessions::page(&rt, &mut st, session_id, revision, cursor.as_deref()),
        Request::SessionList {
            revision,
            cursor,
            limit,
        } => crate::discovery::list(
            &rt,
            &mut st,
            revision.as_deref(),
            cursor.as_deref(),
            *limit,
            cancel,
        ),
        Request::SessionDiscover { cursor, limit } => {
            crate::discovery::discover(&rt, &st, cursor.as_deref(), *limit, cancel)
        }
        Request::ModelCatalog {
            revision,
            cursor,
            limit,
        } => crate::catalog::catalog(
            &rt,
            &mut st,
            revision.as_deref(),
            cursor.as_deref(),
            *limit,
            cancel,
        ),
        Request::ModelCatalogStatus => crate::catalog::status(&rt, cancel),
        Request::ModelRefresh { provider } => {
            crate::catalog::refresh(&rt, &mut st, provider, cancel)
        }
        Request::SelectionSet {
            session_id,
            selection_revision,
            catalog_revision,
            provider,
            model,
            effort,
        } => crate::catalog::select(
            &rt,
            &mut st,
            session_id,
            selection_revision,
            catalog_revision,
            provider,
            model,
            *effort,
            cancel,
        ),
        _ => Err(ErrorCode::UnsupportedMethod),
    }
}

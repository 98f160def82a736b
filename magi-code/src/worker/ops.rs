//! Operations on the session/history worker: one request to the session, discovery or
//! catalog code that serves it.

use super::shared::Shared;
use crate::session::{self, OpResult, SetSelection};
use crate::util::cancel::Cancel;
use crate::{catalog, discovery};
use protocol_core::{ErrorCode, Request};

/// Runs one operation: a result with an optional new status view, or an error code.
pub fn run(shared: &Shared, cancel: &Cancel, request: &Request) -> OpResult {
    if cancel.is_cancelled() {
        return Err(ErrorCode::OperationCancelled);
    }
    let Some(rt) = shared.runtime() else {
        return Err(ErrorCode::StartupFailed);
    };
    let mut guard = shared.sessions();
    let st = &mut *guard;
    let plain = |r: Result<serde_json::Value, ErrorCode>| r.map(|v| (v, None));
    match request {
        Request::SessionCreate => session::create(&rt, st),
        Request::SessionOpen { session_id } => session::open(&rt, st, session_id, cancel),
        Request::HistoryPage {
            session_id,
            revision,
            cursor,
        } => session::page(&rt, st, session_id, revision, cursor.as_deref()),
        Request::SessionList {
            revision,
            cursor,
            limit,
        } => {
            let attached = st.attachment.as_ref().map(|a| a.id.clone());
            plain(discovery::list(
                &rt,
                &mut st.discovery,
                attached.as_ref(),
                revision.as_deref(),
                cursor.as_deref(),
                *limit,
                cancel,
            ))
        }
        Request::SessionDiscover { cursor, limit } => plain(discovery::discover(
            &rt,
            st.attached(),
            cursor.as_deref(),
            *limit,
            cancel,
        )),
        Request::ModelCatalog {
            revision,
            cursor,
            limit,
        } => {
            let selected = st
                .selection
                .as_ref()
                .map_or_else(|| rt.settings.provider.clone(), |s| s.provider.clone());
            plain(catalog::catalog(
                &rt,
                &mut st.catalog,
                &selected,
                revision.as_deref(),
                cursor.as_deref(),
                *limit,
                cancel,
            ))
        }
        Request::ModelCatalogStatus => plain(catalog::status(&rt, cancel)),
        Request::ModelRefresh { provider } => {
            plain(catalog::refresh(&rt, &mut st.catalog, provider, cancel))
        }
        Request::SelectionSet {
            session_id,
            selection_revision,
            catalog_revision,
            provider,
            model,
            effort,
        } => session::select(
            &rt,
            st,
            SetSelection {
                session_id,
                selection_revision,
                catalog_revision,
                provider,
                model,
                effort: *effort,
            },
            cancel,
        ),
        _ => Err(ErrorCode::UnsupportedMethod),
    }
}

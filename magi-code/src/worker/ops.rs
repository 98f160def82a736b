//! Operations on the session/history worker: one request to the session, discovery or
//! catalog code that serves it.

use super::shared::Shared;
use crate::runtime::Runtime;
use crate::session::{self, OpResult, SessionState, SetSelection};
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
        } => session_list(
            &rt,
            st,
            revision.as_deref(),
            cursor.as_deref(),
            *limit,
            cancel,
        ),
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
        } => model_catalog(
            &rt,
            st,
            revision.as_deref(),
            cursor.as_deref(),
            *limit,
            cancel,
        ),
        Request::ModelCatalogStatus => plain(catalog::status(&rt, cancel)),
        Request::ModelRefresh { provider } => {
            let r = catalog::refresh(&rt, &mut st.catalog, provider, cancel);
            reconcile(&rt, st, r)
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

/// `session.list`: a page of the stored sessions, marking the attached one.
fn session_list(
    rt: &Runtime,
    st: &mut SessionState,
    revision: Option<&str>,
    cursor: Option<&str>,
    limit: u64,
    cancel: &Cancel,
) -> OpResult {
    let attached = st.attachment.as_ref().map(|a| a.id.clone());
    discovery::list(
        rt,
        &mut st.discovery,
        attached.as_ref(),
        revision,
        cursor,
        limit,
        cancel,
    )
    .map(|v| (v, None))
}

/// `model.catalog`: a page of the catalog around the selected provider, then the selection
/// reconciled with what the scan saw.
fn model_catalog(
    rt: &Runtime,
    st: &mut SessionState,
    revision: Option<&str>,
    cursor: Option<&str>,
    limit: u64,
    cancel: &Cancel,
) -> OpResult {
    let selected = st
        .selection
        .as_ref()
        .map_or_else(|| rt.settings.provider.clone(), |s| s.provider.clone());
    let r = catalog::catalog(
        rt,
        &mut st.catalog,
        &selected,
        revision,
        cursor,
        limit,
        cancel,
    );
    reconcile(rt, st, r)
}

/// After a successful catalog observation (`model.catalog`, `model.refresh`), the selection
/// takes the cache's effort controls, under a fresh revision only when they changed
/// (local-agent-protocol.md "Status"; `decisions.md` 36).
fn reconcile(
    rt: &Runtime,
    st: &mut SessionState,
    r: Result<serde_json::Value, ErrorCode>,
) -> OpResult {
    let v = r?;
    let refreshed = st.selection.as_ref().and_then(|s| s.recheck(rt).err());
    let view = refreshed.map(|s| {
        st.selection = Some(s);
        session::view(rt, st)
    });
    Ok((v, view))
}

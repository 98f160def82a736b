//! The attached session: `session.create`, `session.open`, `history.page`, the durable append
//! path that turns and selection use, and the selection in effect.

pub mod append;
pub mod load;
pub mod meta;
pub mod page;
pub mod retention;
pub mod selection;
pub mod state;

pub use append::{acknowledge, append, append_unseen, recover, refresh, room, snapshot};
pub use page::page;
pub use selection::{admitted, select, view, SetSelection};
pub use state::{Attachment, OpResult, Selection, SessionState, Snapshot};

use crate::history::trust::Items;
use crate::history::History;
use crate::runtime::Runtime;
use crate::store::{Lease, LeaseError, LeaseKind, SessionId, Sessions};
use crate::util::cancel::Cancel;
use crate::util::ids::fresh_revision;
use crate::util::notice::Notice;
use crate::wire::results::SessionResult;
use load::load_with;
use protocol_core::ErrorCode;
use selection::restore;
use serde_json::Value;
use std::fs;

/// The state of a new, empty history, projecting cards when `tool.cards` was negotiated.
fn fresh_history(rt: &Runtime, id: &SessionId) -> History {
    let mut h = History::new(id, true);
    h.show_cards(rt.tool_cards);
    h
}

/// `session.create`: a lazy handle, no file, no lease, no history.
pub fn create(rt: &Runtime, st: &mut SessionState) -> OpResult {
    let id = SessionId::generate();
    let a = Attachment {
        history: Some(fresh_history(rt, &id)),
        id,
        durable: false,
        writer: None,
        appender: None,
        snapshot: Snapshot::empty(),
        turns: 0,
        meta_failed: false,
        code: None,
        claude: Default::default(),
    };
    let result = session_result(a.id.as_str(), false, &a.snapshot.revision, &[]);
    // The previous attachment (and its lease) is released only now that the new one exists.
    st.attachment = Some(a);
    st.selection = Some(Selection::startup(rt));
    Ok((result, Some(view(rt, st))))
}

/// The `session.create`/`session.open` result, notices in the order found.
fn session_result(id: &str, durable: bool, revision: &str, notices: &[Notice]) -> Value {
    crate::wire::body(&SessionResult {
        session_id: id.to_owned(),
        durable,
        revision: revision.to_owned(),
        notices: notices.iter().map(|n| n.as_str().to_owned()).collect(),
    })
}

/// `session.open`: exact ID only; the previous attachment stays intact on any failure.
pub fn open(rt: &Runtime, st: &mut SessionState, id: &str, cancel: &Cancel) -> OpResult {
    let id = SessionId::new(id).ok_or(ErrorCode::InvalidParams)?;
    let sessions = Sessions::new(&rt.root);
    if !sessions.is_safe() {
        return Err(ErrorCode::SessionInvalid);
    }
    if let Some(a) = st.attachment.as_mut().filter(|a| a.id == id) {
        if !a.durable {
            // Same-child reopen of a lazy handle.
            a.snapshot = Snapshot::empty();
            a.history = Some(fresh_history(rt, &id));
            let result = session_result(id.as_str(), false, &a.snapshot.revision, &[]);
            st.selection = Some(Selection::startup(rt));
            return Ok((result, Some(view(rt, st))));
        }
        let mut loaded = load_with(rt, &id, Items::Deferred, cancel)?;
        loaded.history.close_open_turn();
        let mut notices = loaded.notices;
        let selection = restore(rt, loaded.history.summary(), &mut notices);
        a.snapshot = Snapshot {
            revision: fresh_revision(),
            projection: loaded.projection,
            identity: Some(loaded.identity),
            stale: false,
        };
        a.turns = loaded.history.summary().turns;
        a.history = Some(loaded.history);
        let result = session_result(id.as_str(), true, &a.snapshot.revision, &notices);
        st.selection = Some(selection);
        return Ok((result, Some(view(rt, st))));
    }
    match fs::symlink_metadata(sessions.history_path(&id)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ErrorCode::SessionMissing)
        }
        Err(_) => return Err(ErrorCode::SessionInvalid),
        Ok(m) if !m.file_type().is_file() => return Err(ErrorCode::SessionInvalid),
        Ok(_) => {}
    }
    let lease = Lease::acquire(&sessions, &id, LeaseKind::Writer).map_err(|e| match e {
        LeaseError::Busy => ErrorCode::SessionBusy,
        LeaseError::Unsafe => ErrorCode::SessionInvalid,
    })?;
    // On any error below the new lease is dropped and the old attachment is untouched.
    let mut loaded = load_with(rt, &id, Items::Deferred, cancel)?;
    loaded.history.close_open_turn();
    let mut notices = loaded.notices;
    let selection = restore(rt, loaded.history.summary(), &mut notices);
    let a = Attachment {
        id,
        durable: true,
        writer: Some(lease),
        appender: None,
        snapshot: Snapshot {
            revision: fresh_revision(),
            projection: loaded.projection,
            identity: Some(loaded.identity),
            stale: false,
        },
        turns: loaded.history.summary().turns,
        history: Some(loaded.history),
        meta_failed: false,
        code: None,
        claude: Default::default(),
    };
    let result = session_result(a.id.as_str(), true, &a.snapshot.revision, &notices);
    st.attachment = Some(a);
    st.selection = Some(selection);
    Ok((result, Some(view(rt, st))))
}

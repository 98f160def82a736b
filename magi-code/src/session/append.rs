//! The durable append path of the attached session, and the snapshot refresh after it.

use super::load::load;
use super::state::{Attachment, Snapshot};
use crate::history::{Body, Record};
use crate::runtime::Runtime;
use crate::store::{Appender, Lease, LeaseKind, Sessions};
use crate::util::cancel::Cancel;
use crate::util::ids::fresh_revision;
use protocol_core::ErrorCode;

/// Appends records to the attached session durably: the first append creates the history
/// (with its `session_meta` record), takes the writer lease and fsyncs file and folder.
/// Errors are `persistence_failed`, and nothing is claimed durable that was not written.
pub fn append(rt: &Runtime, a: &mut Attachment, records: &[Record]) -> Result<(), ErrorCode> {
    let sessions = Sessions::new(&rt.root);
    if !sessions.is_safe() {
        return Err(ErrorCode::PersistenceFailed);
    }
    let path = sessions.history_path(&a.id);
    if !a.durable {
        let lease = Lease::acquire(&sessions, &a.id, LeaseKind::Writer)
            .map_err(|_| ErrorCode::PersistenceFailed)?;
        let mut appender = Appender::create(&path).map_err(|_| ErrorCode::PersistenceFailed)?;
        let mut meta = Record::now(a.id.as_str(), Body::SessionMeta {});
        meta.cwd = Some(rt.cwd.to_string_lossy().into_owned());
        appender
            .append(&[meta])
            .map_err(|_| ErrorCode::PersistenceFailed)?;
        a.writer = Some(lease);
        a.appender = Some(appender);
        a.durable = true;
    }
    let _append_lease = Lease::acquire(&sessions, &a.id, LeaseKind::Append)
        .map_err(|_| ErrorCode::PersistenceFailed)?;
    if a.appender.is_none() {
        a.appender = Some(Appender::open(&path).map_err(|_| ErrorCode::PersistenceFailed)?);
    }
    let appender = a.appender.as_mut().ok_or(ErrorCode::PersistenceFailed)?;
    appender
        .append(records)
        .map_err(|_| ErrorCode::PersistenceFailed)?;
    // Our own write moves the history on: the snapshot is stale until rebuilt.
    a.snapshot.stale = true;
    Ok(())
}

/// Rebuilds the attachment's snapshot after its own appends; returns the new revision.
pub fn refresh(rt: &Runtime, a: &mut Attachment, cancel: &Cancel) -> Result<String, ErrorCode> {
    let loaded = load(rt, &a.id, cancel)?;
    a.snapshot = Snapshot {
        revision: fresh_revision(),
        projection: loaded.projection,
        identity: Some(loaded.identity),
        stale: false,
    };
    a.turns = loaded.summary.turns;
    Ok(a.snapshot.revision.clone())
}

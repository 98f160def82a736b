//! `history.page`: pages of the attachment's immutable snapshot, refused once the file moved.

use super::state::{OpResult, SessionState};
use crate::history::PAGE_ENTRIES;
use crate::runtime::Runtime;
use crate::store::Sessions;
use crate::util::paging;
use crate::wire::results::HistoryPageResult;
use protocol_core::limits::HISTORY_PAGE_BYTES;
use protocol_core::ErrorCode;
use serde_json::Value;
use std::fs;
use std::os::unix::fs::MetadataExt;

fn current_identity(path: &std::path::Path) -> Option<(u64, u64, u64, i128)> {
    fs::symlink_metadata(path).ok().map(|m| {
        (
            m.dev(),
            m.ino(),
            m.len(),
            i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        )
    })
}

/// `history.page`.
pub fn page(
    rt: &Runtime,
    st: &mut SessionState,
    session_id: &str,
    revision: &str,
    cursor: Option<&str>,
) -> OpResult {
    let a = st.attachment.as_mut().ok_or(ErrorCode::SessionMissing)?;
    if a.id.as_str() != session_id {
        return Err(ErrorCode::StaleSession);
    }
    let snap = &mut a.snapshot;
    if snap.stale || snap.revision != revision {
        return Err(ErrorCode::StaleRevision);
    }
    if let Some(id) = snap.identity {
        let now = current_identity(&Sessions::new(&rt.root).history_path(&a.id));
        if now != Some((id.dev, id.ino, id.len, id.mtime_ns)) {
            snap.stale = true;
            return Err(ErrorCode::StaleRevision);
        }
    }
    let entries = &snap.projection.entries;
    let start = match cursor {
        None => 0,
        Some(c) => paging::parse_cursor(c, &snap.revision, entries.len())
            .ok_or(ErrorCode::StaleRevision)?,
    };
    // The envelope is the wire type; the entries are the projection's serialized parts.
    let envelope = |next_cursor, complete| {
        crate::wire::body(&HistoryPageResult {
            session_id: session_id.to_owned(),
            revision: snap.revision.clone(),
            entries: Vec::new(),
            next_cursor,
            complete,
        })
    };
    let base = paging::base_bytes(envelope(None, false));
    let end = paging::end(entries, start, PAGE_ENTRIES, base, HISTORY_PAGE_BYTES);
    let next = paging::cursor(end, entries.len(), &snap.revision);
    let complete = next.is_none() && snap.projection.complete;
    let mut result = envelope(next, complete);
    result["entries"] = Value::Array(paging::values(&entries[start..end]));
    Ok((result, None))
}

//! `session.discover`: names after the cursor in ascending order, validated under per-call
//! budgets; memory stays bounded whatever the folder size.

use super::examine::{examine, history_stem, Budget, Examined};
use crate::runtime::Runtime;
use crate::store::{ReadError, SessionId, Sessions};
use crate::util::cancel::Cancel;
use crate::util::notice::Notice;
use crate::wire::common::True;
use crate::wire::results::{SessionDiscoverResult, SessionEntry};
use protocol_core::limits::{
    DISCOVER_CANDIDATES, DISCOVER_PAGE_BYTES, DISCOVER_SCAN_BYTES, DISCOVER_SCAN_LINES,
    DISCOVER_SCAN_MS, DISCOVER_SESSION_BYTES, DISCOVER_SESSION_LINES,
};
use protocol_core::ErrorCode;
use serde_json::Value;
use std::collections::BinaryHeap;
use std::fs;
use std::time::{Duration, Instant};

/// `session.discover`: names after the cursor in ascending order, validated under per-call
/// budgets; a budget hit ends the page early with a cursor.
pub fn discover(
    rt: &Runtime,
    attached: Option<&SessionId>,
    cursor: Option<&str>,
    limit: u64,
    cancel: &Cancel,
) -> Result<Value, ErrorCode> {
    let sessions = Sessions::new(&rt.root);
    let (candidates, more_than_kept) = candidates(&sessions, cursor, cancel)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut budget = Budget {
        bytes: DISCOVER_SCAN_BYTES,
        lines: DISCOVER_SCAN_LINES,
        file_bytes: DISCOVER_SESSION_BYTES,
        file_lines: DISCOVER_SESSION_LINES,
        deadline: Instant::now() + Duration::from_millis(DISCOVER_SCAN_MS),
    };
    let notices_base = [Notice::SessionsOmittedInvalid];
    let mut size = envelope_bytes(&notices_base);
    let mut out: Vec<SessionEntry> = Vec::new();
    let mut omitted = false;
    let mut last: Option<&SessionId> = None;
    let mut stopped_early = false;
    for id in &candidates {
        if out.len() >= limit {
            stopped_early = true;
            break;
        }
        if cancel.is_cancelled() {
            return Err(ErrorCode::OperationCancelled);
        }
        if Instant::now() > budget.deadline
            || budget.bytes < DISCOVER_SESSION_BYTES
            || budget.lines < DISCOVER_SESSION_LINES
        {
            stopped_early = true;
            break;
        }
        match examine(rt, attached, &sessions, id, &mut budget, None) {
            Ok(Examined::Entry(e)) => {
                let add = crate::wire::body(&e).to_string().len() + usize::from(!out.is_empty());
                if size + add > DISCOVER_PAGE_BYTES {
                    stopped_early = true;
                    break;
                }
                size += add;
                out.push(e);
            }
            Ok(Examined::Excluded) | Err(ReadError::Missing) => {}
            Ok(Examined::Invalid) | Err(ReadError::Unsafe | ReadError::TooLarge) => omitted = true,
        }
        last = Some(id);
    }
    let complete = !stopped_early && !more_than_kept;
    let next = if complete {
        None
    } else {
        last.map(|l| l.as_str().to_owned())
            .or_else(|| cursor.map(str::to_owned))
    };
    // A page that examined nothing cannot make progress without a cursor: only possible when
    // the very first candidate is stopped, which the budgets above never do.
    let notices: Vec<Notice> = if omitted {
        notices_base.to_vec()
    } else {
        vec![]
    };
    Ok(crate::wire::body(&SessionDiscoverResult {
        sessions: out,
        complete: complete && next.is_none(),
        next_cursor: next,
        provisional: True,
        notices: codes(&notices),
    }))
}

/// The page's bytes without its entries, at their largest (a longest cursor, every notice):
/// what the entries are added to when the page bound is checked.
fn envelope_bytes(notices: &[Notice]) -> usize {
    crate::wire::body(&SessionDiscoverResult {
        sessions: Vec::new(),
        next_cursor: Some("x".repeat(protocol_core::limits::SESSION_ID_BYTES)),
        complete: false,
        provisional: True,
        notices: codes(notices),
    })
    .to_string()
    .len()
}

/// Notices as the result lists them, in the order given.
fn codes(notices: &[Notice]) -> Vec<String> {
    notices.iter().map(|n| n.as_str().to_owned()).collect()
}

/// The smallest [`DISCOVER_CANDIDATES`] history names after `cursor`, ascending, and whether
/// the folder held more: a bounded heap, so memory stays bounded however large the folder is.
fn candidates(
    sessions: &Sessions,
    cursor: Option<&str>,
    cancel: &Cancel,
) -> Result<(Vec<SessionId>, bool), ErrorCode> {
    let meta = fs::symlink_metadata(sessions.dir()).map_err(|_| ErrorCode::DiscoveryUnavailable)?;
    if !meta.file_type().is_dir() {
        return Err(ErrorCode::DiscoveryUnavailable);
    }
    // Keep only the smallest names after the cursor: memory stays bounded however large the
    // folder is.
    let mut heap: BinaryHeap<SessionId> = BinaryHeap::new();
    let mut more_than_kept = false;
    for (n, entry) in fs::read_dir(sessions.dir())
        .map_err(|_| ErrorCode::DiscoveryUnavailable)?
        .enumerate()
    {
        if n.is_multiple_of(1024) && cancel.is_cancelled() {
            return Err(ErrorCode::OperationCancelled);
        }
        let entry = entry.map_err(|_| ErrorCode::DiscoveryUnavailable)?;
        let Ok(name) = entry.file_name().into_string() else {
            return Err(ErrorCode::DiscoveryUnavailable);
        };
        let Some(id) = history_stem(&name)? else {
            continue;
        };
        if cursor.is_some_and(|c| id.as_str() <= c) {
            continue;
        }
        heap.push(id);
        if heap.len() > DISCOVER_CANDIDATES {
            heap.pop();
            more_than_kept = true;
        }
    }
    Ok((heap.into_sorted_vec(), more_than_kept))
}

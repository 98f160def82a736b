//! Read-only discovery: `session.list` (one bounded, fingerprinted snapshot per child) and the
//! `session.discover` extension (incremental, provisional, no global ceiling).

use crate::cancel::Cancel;
use crate::history::{self, display_title};
use crate::paging;
use crate::sessions::SessionState;
use crate::startup::{fresh_revision, Runtime};
use crate::store::{self, ReadError, SessionId, Sessions};
use protocol_core::ErrorCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, BinaryHeap};
use std::fs;
use std::time::{Duration, Instant};

/// `discovery_directory_entries`.
pub const DIRECTORY_ENTRIES: usize = 4_096;
/// `discovery_sessions`.
pub const SESSIONS: usize = 256;
/// `discovery_session_bytes`.
pub const SESSION_BYTES: u64 = 8 << 20;
/// `discovery_session_lines`.
pub const SESSION_LINES: usize = 10_000;
/// `discovery_scan_bytes`.
pub const SCAN_BYTES: u64 = 64 << 20;
/// `discovery_scan_lines`.
pub const SCAN_LINES: usize = 100_000;
/// `discovery_scan_ms`.
pub const SCAN_MS: u64 = 2_000;
/// `discover_candidates`: names one `session.discover` call keeps and examines at most.
pub const DISCOVER_CANDIDATES: usize = 256;

/// The discovery snapshot of this child.
#[derive(Debug, Clone)]
pub struct ListSnapshot {
    revision: String,
    entries: Vec<String>,
    notices: Vec<&'static str>,
    fingerprint: [u8; 32],
    stale: bool,
}

struct Scan {
    entries: Vec<String>,
    omitted_invalid: bool,
    fingerprint: [u8; 32],
}

/// Names in the sessions folder, bounded. Symlinked or missing folder → unavailable.
fn inventory(dir: &std::path::Path, bound: usize) -> Result<Vec<String>, ErrorCode> {
    let meta = fs::symlink_metadata(dir).map_err(|_| ErrorCode::DiscoveryUnavailable)?;
    if !meta.file_type().is_dir() {
        return Err(ErrorCode::DiscoveryUnavailable);
    }
    let mut names = Vec::new();
    for (n, entry) in fs::read_dir(dir)
        .map_err(|_| ErrorCode::DiscoveryUnavailable)?
        .enumerate()
    {
        if n >= bound {
            return Err(ErrorCode::DiscoveryLimit);
        }
        let entry = entry.map_err(|_| ErrorCode::DiscoveryUnavailable)?;
        let name = entry
            .file_name()
            .into_string()
            .map_err(|_| ErrorCode::DiscoveryUnavailable)?;
        names.push(name);
    }
    Ok(names)
}

/// The stem of a primary history name; a `.jsonl` name with a bad stem is an error.
fn history_stem(name: &str) -> Result<Option<SessionId>, ErrorCode> {
    match name.strip_suffix(".jsonl") {
        Some(stem) => SessionId::new(stem)
            .map(Some)
            .ok_or(ErrorCode::DiscoveryUnavailable),
        None => Ok(None),
    }
}

struct Budget {
    bytes: u64,
    lines: usize,
    deadline: Instant,
}

enum Examined {
    Entry(Value),
    Excluded,
    Invalid,
}

/// Reads and classifies one candidate, charging the budget.
fn examine(
    rt: &Runtime,
    st: &SessionState,
    sessions: &Sessions,
    id: &SessionId,
    budget: &mut Budget,
    hasher: Option<&mut Sha256>,
) -> Result<Examined, ReadError> {
    let per_file = SESSION_BYTES.min(budget.bytes);
    let per_lines = SESSION_LINES.min(budget.lines);
    let lease = sessions.lease_present(id);
    let mut reader = history::Reader::new(id, false);
    let mut consumed = (0u64, 0usize);
    let mut digest = Sha256::new();
    let hashing = hasher.is_some();
    let streamed = store::stream_held(
        &sessions.history_path(id),
        per_file,
        per_lines,
        usize::try_from(per_file).unwrap_or(usize::MAX),
        &mut |line| {
            consumed.0 += line.len() as u64 + 1;
            consumed.1 += 1;
            if hashing {
                digest.update(line);
                digest.update(b"\n");
            }
            reader.line(line)
        },
    );
    let streamed = match streamed {
        Ok(s) => s,
        Err(ReadError::Unsafe) => {
            // No trustworthy consumed size: charge the whole per-file budget.
            budget.bytes = budget.bytes.saturating_sub(SESSION_BYTES);
            budget.lines = budget.lines.saturating_sub(SESSION_LINES);
            if let Some(h) = hasher {
                h.update(id.as_str().as_bytes());
                h.update(b"\0unsafe\0");
                h.update([u8::from(lease)]);
            }
            return Ok(Examined::Invalid);
        }
        Err(e) => return Err(e),
    };
    budget.bytes = budget.bytes.saturating_sub(consumed.0);
    budget.lines = budget.lines.saturating_sub(consumed.1);
    if let Some(h) = hasher {
        h.update(id.as_str().as_bytes());
        h.update(b"\0");
        if let Some(st) = &streamed {
            let i = st.identity;
            for n in [i.dev, i.ino, i.len, u64::from(i.mode)] {
                h.update(n.to_le_bytes());
            }
            h.update(i.mtime_ns.to_le_bytes());
            h.update([u8::from(st.torn)]);
        }
        h.update(digest.finalize());
        h.update([u8::from(lease)]);
    }
    let torn = streamed.as_ref().is_some_and(|s| s.torn);
    let (Some(_), Ok((parsed, _))) = (streamed, reader.finish(torn)) else {
        return Ok(Examined::Invalid);
    };
    if !crate::sessions::cwd_matches(rt, &parsed.cwds) {
        return Ok(Examined::Excluded);
    }
    let ours = st.attachment.as_ref().is_some_and(|a| &a.id == id);
    let unverified = parsed.cwds.is_empty();
    // Lease files of this child's own attachment do not make it busy to this child.
    let eligibility = if lease && !ours {
        "busy"
    } else if unverified {
        "cwd_unverified"
    } else {
        "available"
    };
    let notices: Vec<&str> = if unverified {
        vec!["cwd_unverified"]
    } else {
        vec![]
    };
    Ok(Examined::Entry(json!({
        "session_id": id.as_str(),
        "title": parsed.title.as_deref().and_then(display_title),
        "updated_at": parsed.updated_ms.map(store::rfc3339),
        "eligibility": eligibility,
        "notices": notices,
    })))
}

fn scan(rt: &Runtime, st: &SessionState, cancel: &Cancel) -> Result<Scan, ErrorCode> {
    scan_with(rt, st, cancel, &mut |_| {})
}

/// [`scan`] with a hook after each examined file, so tests can change the folder mid-scan.
fn scan_with(
    rt: &Runtime,
    st: &SessionState,
    cancel: &Cancel,
    after_file: &mut dyn FnMut(&SessionId),
) -> Result<Scan, ErrorCode> {
    let sessions = Sessions::new(&rt.root);
    let mut budget = Budget {
        bytes: SCAN_BYTES,
        lines: SCAN_LINES,
        deadline: Instant::now() + Duration::from_millis(SCAN_MS),
    };
    let first = inventory(sessions.dir(), DIRECTORY_ENTRIES)?;
    let mut ids = BTreeSet::new();
    for name in &first {
        if let Some(id) = history_stem(name)? {
            ids.insert(id);
        }
    }
    if ids.len() > SESSIONS {
        return Err(ErrorCode::DiscoveryLimit);
    }
    let mut hasher = Sha256::new();
    hasher.update(
        st.attachment
            .as_ref()
            .map_or("", |a| a.id.as_str())
            .as_bytes(),
    );
    let mut entries = Vec::new();
    let mut omitted_invalid = false;
    for id in &ids {
        if cancel.is_cancelled() {
            return Err(ErrorCode::OperationCancelled);
        }
        if Instant::now() > budget.deadline {
            return Err(ErrorCode::DiscoveryLimit);
        }
        match examine(rt, st, &sessions, id, &mut budget, Some(&mut hasher)) {
            Ok(Examined::Entry(e)) => entries.push(e.to_string()),
            Ok(Examined::Excluded) => {}
            Ok(Examined::Invalid) => omitted_invalid = true,
            Err(ReadError::Missing) => return Err(ErrorCode::StaleRevision),
            Err(ReadError::TooLarge) => return Err(ErrorCode::DiscoveryLimit),
            Err(ReadError::Unsafe) => omitted_invalid = true,
        }
        after_file(id);
    }
    let mut second = inventory(sessions.dir(), DIRECTORY_ENTRIES)?;
    let mut first = first;
    first.sort_unstable();
    second.sort_unstable();
    if first != second {
        return Err(ErrorCode::StaleRevision);
    }
    let mut fp = [0u8; 32];
    fp.copy_from_slice(&hasher.finalize());
    Ok(Scan {
        entries,
        omitted_invalid,
        fingerprint: fp,
    })
}

fn page(snap: &ListSnapshot, start: usize, limit: u64) -> Value {
    let limit = usize::try_from(limit).unwrap_or(100);
    let base = paging::base_bytes(
        json!({ "revision": snap.revision, "sessions": [], "complete": false, "notices": snap.notices }),
    );
    let end = paging::end(&snap.entries, start, limit, base);
    let next = paging::cursor(end, snap.entries.len(), &snap.revision);
    json!({
        "revision": snap.revision,
        "sessions": paging::values(&snap.entries[start..end]),
        "complete": next.is_none(),
        "next_cursor": next,
        "notices": snap.notices,
    })
}

/// The discovery snapshot lives beside the attachment in the session state.
#[derive(Debug, Default)]
pub struct DiscoveryState {
    snapshot: Option<ListSnapshot>,
}

/// `session.list`.
pub fn list(
    rt: &Runtime,
    st: &mut SessionState,
    revision: Option<&str>,
    cursor: Option<&str>,
    limit: u64,
    cancel: &Cancel,
) -> Result<(Value, Option<protocol_core::ReadyView>), ErrorCode> {
    match (revision, cursor) {
        (Some(rev), Some(cur)) => {
            let snap = st
                .discovery
                .snapshot
                .as_mut()
                .ok_or(ErrorCode::StaleRevision)?;
            if snap.stale || snap.revision != rev {
                return Err(ErrorCode::StaleRevision);
            }
            let idx = paging::parse_cursor(cur, rev, snap.entries.len())
                .ok_or(ErrorCode::StaleRevision)?;
            let fingerprint = snap.fingerprint;
            // Rescan under the same bounds; any mutation or failure invalidates stickily.
            let st_ro: &SessionState = st;
            let rescan = scan(rt, st_ro, cancel);
            let snap = st
                .discovery
                .snapshot
                .as_mut()
                .ok_or(ErrorCode::StaleRevision)?;
            match rescan {
                Ok(s) if s.fingerprint == fingerprint => Ok((page(snap, idx, limit), None)),
                Ok(_) => {
                    snap.stale = true;
                    Err(ErrorCode::StaleRevision)
                }
                Err(ErrorCode::OperationCancelled) => Err(ErrorCode::OperationCancelled),
                Err(e) => {
                    snap.stale = true;
                    Err(
                        if e == ErrorCode::DiscoveryLimit || e == ErrorCode::DiscoveryUnavailable {
                            e
                        } else {
                            ErrorCode::StaleRevision
                        },
                    )
                }
            }
        }
        _ => {
            // A fresh listing always replaces the previous snapshot (`decisions.md` 12).
            if let Some(old) = st.discovery.snapshot.as_mut() {
                old.stale = true;
            }
            let s = scan(rt, st, cancel)?;
            let snap = ListSnapshot {
                revision: fresh_revision(),
                entries: s.entries,
                notices: if s.omitted_invalid {
                    vec!["sessions_omitted_invalid"]
                } else {
                    vec![]
                },
                fingerprint: s.fingerprint,
                stale: false,
            };
            let out = page(&snap, 0, limit);
            st.discovery.snapshot = Some(snap);
            Ok((out, None))
        }
    }
}

/// `session.discover`: names after the cursor in ascending order, validated under per-call
/// budgets; a budget hit ends the page early with a cursor.
pub fn discover(
    rt: &Runtime,
    st: &SessionState,
    cursor: Option<&str>,
    limit: u64,
    cancel: &Cancel,
) -> Result<(Value, Option<protocol_core::ReadyView>), ErrorCode> {
    let sessions = Sessions::new(&rt.root);
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
    let candidates = heap.into_sorted_vec();
    let limit = usize::try_from(limit).unwrap_or(100);
    let mut budget = Budget {
        bytes: SCAN_BYTES,
        lines: SCAN_LINES,
        deadline: Instant::now() + Duration::from_millis(SCAN_MS),
    };
    let notices_base = ["sessions_omitted_invalid"];
    let base = json!({ "sessions": [], "next_cursor": "x".repeat(64), "complete": false, "provisional": true, "notices": notices_base })
        .to_string()
        .len();
    let mut size = base;
    let mut out: Vec<Value> = Vec::new();
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
            || budget.bytes < SESSION_BYTES
            || budget.lines < SESSION_LINES
        {
            stopped_early = true;
            break;
        }
        match examine(rt, st, &sessions, id, &mut budget, None) {
            Ok(Examined::Entry(e)) => {
                let add = e.to_string().len() + usize::from(!out.is_empty());
                if size + add > paging::PAGE_BYTES {
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
    let notices: Vec<&str> = if omitted {
        notices_base.to_vec()
    } else {
        vec![]
    };
    Ok((
        json!({ "sessions": out, "next_cursor": next, "complete": complete && next.is_none(), "provisional": true, "notices": notices }),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    fn runtime() -> (tempfile::TempDir, Runtime) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("home");
        let cwd = d.path().join("cwd");
        fs::create_dir_all(root.join("sessions")).unwrap();
        fs::create_dir_all(&cwd).unwrap();
        let rt = Runtime {
            root: fs::canonicalize(&root).unwrap(),
            cwd: fs::canonicalize(&cwd).unwrap(),
            settings: Settings::default(),
            context_id: "0".repeat(64),
        };
        (d, rt)
    }

    fn write(rt: &Runtime, id: &str) {
        let line = json!({"type":"session_meta","session_id":id,"ts":"2026-11-30T12:00:00Z","cwd":rt.cwd.to_string_lossy()});
        fs::write(
            rt.root.join("sessions").join(format!("{id}.jsonl")),
            format!("{line}\n"),
        )
        .unwrap();
    }

    #[test]
    fn a_file_replaced_during_the_scan_is_stale() {
        let (_d, rt) = runtime();
        for id in ["a", "b", "c"] {
            write(&rt, id);
        }
        let st = SessionState::default();
        let c = Cancel::default();
        assert!(scan_with(&rt, &st, &c, &mut |_| {}).is_ok());
        // Replacing a later file while the scan runs changes the inventory or its content.
        let mut hook = |id: &SessionId| {
            if id.as_str() == "a" {
                fs::remove_file(rt.root.join("sessions/c.jsonl")).unwrap();
            }
        };
        assert_eq!(
            scan_with(&rt, &st, &c, &mut hook).err(),
            Some(ErrorCode::StaleRevision)
        );
        write(&rt, "c");
        let mut added = |id: &SessionId| {
            if id.as_str() == "c" {
                write(&rt, "d");
            }
        };
        assert_eq!(
            scan_with(&rt, &st, &c, &mut added).err(),
            Some(ErrorCode::StaleRevision)
        );
    }

    #[test]
    fn cancellation_between_files() {
        let (_d, rt) = runtime();
        for id in ["a", "b"] {
            write(&rt, id);
        }
        let st = SessionState::default();
        let c = Cancel::default();
        let mut hook = |_: &SessionId| c.cancel();
        assert_eq!(
            scan_with(&rt, &st, &c, &mut hook).err(),
            Some(ErrorCode::OperationCancelled)
        );
    }
}

//! Read-only discovery: `session.list` (one bounded, fingerprinted snapshot per child) and the
//! `session.discover` extension (incremental, provisional, no global ceiling).

pub mod discover;
pub mod examine;

pub use discover::discover;

use crate::runtime::Runtime;
use crate::store::{ReadError, SessionId, Sessions};
use crate::util::cancel::Cancel;
use crate::util::notice::{self, Notice};
use crate::util::paging::Snapshot;
use crate::wire::results::SessionListResult;
use examine::{examine, history_stem, inventory, Budget, Examined};
use protocol_core::limits::{
    DISCOVERY_DIRECTORY_ENTRIES, DISCOVERY_SCAN_BYTES, DISCOVERY_SCAN_LINES, DISCOVERY_SCAN_MS,
    DISCOVERY_SESSIONS, DISCOVERY_SESSION_BYTES, DISCOVERY_SESSION_LINES,
};
use protocol_core::ErrorCode;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

struct Scan {
    entries: Vec<String>,
    omitted_invalid: bool,
    fingerprint: [u8; 32],
}

fn scan(rt: &Runtime, attached: Option<&SessionId>, cancel: &Cancel) -> Result<Scan, ErrorCode> {
    scan_with(rt, attached, cancel, &mut |_| {})
}

/// [`scan`] with a hook after each examined file, so tests can change the folder mid-scan.
fn scan_with(
    rt: &Runtime,
    attached: Option<&SessionId>,
    cancel: &Cancel,
    after_file: &mut dyn FnMut(&SessionId),
) -> Result<Scan, ErrorCode> {
    let sessions = Sessions::new(&rt.root);
    let mut budget = Budget {
        bytes: DISCOVERY_SCAN_BYTES,
        lines: DISCOVERY_SCAN_LINES,
        file_bytes: DISCOVERY_SESSION_BYTES,
        file_lines: DISCOVERY_SESSION_LINES,
        deadline: Instant::now() + Duration::from_millis(DISCOVERY_SCAN_MS),
    };
    let first = inventory(sessions.dir(), DISCOVERY_DIRECTORY_ENTRIES)?;
    let mut ids = BTreeSet::new();
    for name in &first {
        if let Some(id) = history_stem(name)? {
            ids.insert(id);
        }
    }
    if ids.len() > DISCOVERY_SESSIONS {
        return Err(ErrorCode::DiscoveryLimit);
    }
    let mut hasher = Sha256::new();
    hasher.update(attached.map_or("", SessionId::as_str).as_bytes());
    let mut entries = Vec::new();
    let mut omitted_invalid = false;
    for id in &ids {
        if cancel.is_cancelled() {
            return Err(ErrorCode::OperationCancelled);
        }
        if Instant::now() > budget.deadline {
            return Err(ErrorCode::DiscoveryLimit);
        }
        match examine(rt, attached, &sessions, id, &mut budget, Some(&mut hasher)) {
            Ok(Examined::Entry(e)) => entries.push(crate::wire::body(&e).to_string()),
            Ok(Examined::Excluded) => {}
            Ok(Examined::Invalid) => omitted_invalid = true,
            Err(ReadError::Missing) => return Err(ErrorCode::StaleRevision),
            Err(ReadError::TooLarge) => return Err(ErrorCode::DiscoveryLimit),
            Err(ReadError::Unsafe) => omitted_invalid = true,
        }
        after_file(id);
    }
    let mut second = inventory(sessions.dir(), DISCOVERY_DIRECTORY_ENTRIES)?;
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

fn page(snap: &Snapshot, start: usize, limit: u64) -> Value {
    let envelope = crate::wire::body(&SessionListResult {
        revision: snap.revision.clone(),
        sessions: Vec::new(),
        next_cursor: None,
        complete: false,
        notices: snap.notices.iter().map(|&n| n.to_owned()).collect(),
    });
    snap.page(
        start,
        limit,
        protocol_core::limits::DISCOVERY_PAGE_BYTES,
        "sessions",
        envelope,
    )
}

/// `session.list`: a fresh snapshot in `slot` (the old one goes stale), or the page a
/// continuation names after a rescan that must match its fingerprint. `attached` is this
/// child's own session, which never lists as busy to it.
pub fn list(
    rt: &Runtime,
    slot: &mut Option<Snapshot>,
    attached: Option<&SessionId>,
    revision: Option<&str>,
    cursor: Option<&str>,
    limit: u64,
    cancel: &Cancel,
) -> Result<Value, ErrorCode> {
    match (revision, cursor) {
        (Some(rev), Some(cur)) => {
            let (idx, fingerprint) =
                Snapshot::continuation(slot, rev, cur).ok_or(ErrorCode::StaleRevision)?;
            // Rescan under the same bounds; any mutation or failure invalidates stickily.
            let rescan = scan(rt, attached, cancel);
            let snap = slot.as_mut().ok_or(ErrorCode::StaleRevision)?;
            match rescan {
                Ok(s) if s.fingerprint == fingerprint => Ok(page(snap, idx, limit)),
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
            if let Some(old) = slot.as_mut() {
                old.stale = true;
            }
            let s = scan(rt, attached, cancel)?;
            let notices = if s.omitted_invalid {
                vec![Notice::SessionsOmittedInvalid]
            } else {
                vec![]
            };
            let snap = Snapshot::new(s.entries, notice::sorted(notices), s.fingerprint);
            let out = page(&snap, 0, limit);
            *slot = Some(snap);
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs;

    fn runtime() -> (tempfile::TempDir, Runtime) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("home");
        let cwd = d.path().join("cwd");
        fs::create_dir_all(root.join("sessions")).unwrap();
        fs::create_dir_all(&cwd).unwrap();
        let rt = Runtime::for_tests(
            &fs::canonicalize(&root).unwrap(),
            &fs::canonicalize(&cwd).unwrap(),
        );
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
        let c = Cancel::default();
        assert!(scan_with(&rt, None, &c, &mut |_| {}).is_ok());
        // Replacing a later file while the scan runs changes the inventory or its content.
        let mut hook = |id: &SessionId| {
            if id.as_str() == "a" {
                fs::remove_file(rt.root.join("sessions/c.jsonl")).unwrap();
            }
        };
        assert_eq!(
            scan_with(&rt, None, &c, &mut hook).err(),
            Some(ErrorCode::StaleRevision)
        );
        write(&rt, "c");
        let mut added = |id: &SessionId| {
            if id.as_str() == "c" {
                write(&rt, "d");
            }
        };
        assert_eq!(
            scan_with(&rt, None, &c, &mut added).err(),
            Some(ErrorCode::StaleRevision)
        );
    }

    #[test]
    fn cancellation_between_files() {
        let (_d, rt) = runtime();
        for id in ["a", "b"] {
            write(&rt, id);
        }
        let c = Cancel::default();
        let mut hook = |_: &SessionId| c.cancel();
        assert_eq!(
            scan_with(&rt, None, &c, &mut hook).err(),
            Some(ErrorCode::OperationCancelled)
        );
    }
}

//! Retention (`backend.md` `retention_days`): the sweep `magi-code chat` runs when it starts.
//! It deletes primary histories (`sessions/<id>.jsonl`, never `subagents/` or `archive/`)
//! whose last durable event is older than the retention, never one whose lease another child
//! holds, and never one it cannot date. `serve --stdio` never calls it.

use crate::history::History;
use crate::store::{Lease, LeaseKind, SessionId, Sessions};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// One day in milliseconds.
const DAY_MS: i64 = 86_400_000;

/// Deletes the primary histories under `root` whose greatest record timestamp is more than
/// `days` days before `now_ms`, except `keep` (the session about to be opened); `days == 0`
/// disables the sweep. Returns how many went.
///
/// A history is dated by a strict read of its read window (`decisions.md` 47), whatever its
/// length: one that is unreadable, invalid, whose newest record no window holds, or without
/// records is kept. Each candidate is locked
/// first (its writer and append leases, without waiting): one attached or being appended to
/// by another child is skipped.
#[must_use]
pub fn prune(root: &Path, days: u64, now_ms: i64, keep: Option<&str>) -> usize {
    if days == 0 {
        return 0;
    }
    let cutoff = i64::try_from(days)
        .ok()
        .and_then(|d| d.checked_mul(DAY_MS))
        .map_or(i64::MIN, |span| now_ms.saturating_sub(span));
    let sessions = Sessions::new(root);
    if !sessions.is_safe() {
        return 0;
    }
    let Ok(dir) = fs::read_dir(sessions.dir()) else {
        return 0;
    };
    let mut pruned = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".jsonl"))
            .and_then(SessionId::new)
        else {
            continue;
        };
        if keep == Some(id.as_str()) {
            continue;
        }
        if prune_one(&sessions, &id, cutoff) {
            pruned += 1;
        }
    }
    pruned
}

/// Deletes the history of `id` if it is a regular file last written before `cutoff` and no
/// one holds it.
fn prune_one(sessions: &Sessions, id: &SessionId, cutoff: i64) -> bool {
    let path = sessions.history_path(id);
    if !fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) {
        return false;
    }
    // Held for the read and the delete: no child can attach or append in between.
    let Ok(_writer) = Lease::acquire(sessions, id, LeaseKind::Writer) else {
        return false;
    };
    let Ok(_append) = Lease::acquire(sessions, id, LeaseKind::Append) else {
        return false;
    };
    let mut history = History::new(id, false);
    // The newest timestamp is in the read window: its cost is the window's, whatever the length.
    let read = super::load::read_window(
        &path,
        &mut history,
        crate::history::Bounds::READ,
        &crate::util::cancel::Cancel::default(),
    );
    let Ok((identity, _)) = read else {
        return false;
    };
    let Some(last) = history.summary().updated_ms else {
        return false;
    };
    if last >= cutoff {
        return false;
    }
    // The name must still lead to the file that was read.
    let same = fs::symlink_metadata(&path)
        .is_ok_and(|m| m.dev() == identity.dev && m.ino() == identity.ino);
    if !(same && fs::remove_file(&path).is_ok()) {
        return false;
    }
    // Its derived metadata goes with it (best effort: an orphan is never trusted anyway).
    let _ = fs::remove_file(sessions.meta_path(id));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::time::{now_ms, rfc3339};

    fn write(dir: &Path, id: &str, ts_ms: i64) -> std::path::PathBuf {
        let p = dir.join(format!("{id}.jsonl"));
        let line = serde_json::json!({"type":"session_meta","session_id":id,"ts":rfc3339(ts_ms)});
        fs::write(&p, format!("{line}\n")).unwrap();
        p
    }

    #[test]
    fn old_histories_go_recent_and_undatable_ones_stay() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("sessions");
        fs::create_dir_all(dir.join("subagents")).unwrap();
        fs::create_dir_all(dir.join("archive")).unwrap();
        let now = now_ms();
        let cutoff = now - 30 * DAY_MS;
        let old = write(&dir, "old", cutoff - 1);
        let edge = write(&dir, "edge", cutoff);
        let recent = write(&dir, "recent", now);
        let sub = write(&dir.join("subagents"), "old-1", cutoff - DAY_MS);
        let arch = write(&dir.join("archive"), "old", cutoff - DAY_MS);
        let bad = dir.join("bad.jsonl");
        fs::write(&bad, b"not json\n").unwrap();
        let empty = dir.join("empty.jsonl");
        fs::write(&empty, b"").unwrap();
        let held = write(&dir, "held", cutoff - DAY_MS);
        let sessions = Sessions::new(d.path());
        let lease = Lease::acquire(
            &sessions,
            &SessionId::new("held").unwrap(),
            LeaseKind::Writer,
        )
        .unwrap();

        assert_eq!(prune(d.path(), 0, now, None), 0, "zero disables the sweep");
        assert!(old.exists());
        assert_eq!(
            prune(d.path(), 30, now, Some("old")),
            0,
            "the session to open stays"
        );
        assert_eq!(prune(d.path(), 30, now, None), 1);
        assert!(!old.exists(), "1 ms past the retention goes");
        assert!(edge.exists(), "exactly at the retention stays");
        for kept in [&recent, &sub, &arch, &bad, &empty, &held] {
            assert!(kept.exists(), "{kept:?} kept");
        }
        drop(lease);
        assert_eq!(prune(d.path(), 30, now, None), 1, "released, it goes");
        assert!(!held.exists());
        assert!(
            !sessions.lease_present(&SessionId::new("held").unwrap()),
            "no lease file left behind"
        );
    }
}

//! The durable append path of the attached session, and the snapshot refresh after it. The
//! attachment's derived state is extended by what it appends, never re-read (`runner.md` 4).

use super::load::{load, load_with};
use super::state::Attachment;
use crate::history::room::Room;
use crate::history::trust::Items;
use crate::history::{Body, Record};
use crate::runtime::Runtime;
use crate::store::{Appender, Lease, LeaseKind, Sessions};
use crate::util::cancel::Cancel;
use crate::util::ids::fresh_revision;
use protocol_core::ErrorCode;

/// Counts the bytes written through it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The stored line length of `r`, LF included, as the appender writes it.
fn line_len(r: &Record) -> usize {
    let mut c = Counter(0);
    serde_json::to_writer(&mut c, r).map_or(usize::MAX, |()| c.0 + 1)
}

/// Appends records to the attached session durably: the first append creates the history
/// (with its `session_meta` record), takes the writer lease and fsyncs file and folder.
/// Errors are `persistence_failed`, and nothing is claimed durable that was not written.
/// After the write the attachment's derived state takes the records and the snapshot takes the
/// file's identity; when the file changed under it (another writer) or a write failed part way,
/// that state is rebuilt from the file instead.
pub fn append(rt: &Runtime, a: &mut Attachment, records: &[Record]) -> Result<(), ErrorCode> {
    extend(rt, a, records).map(|_| ())
}

/// After a durable append: the derived metadata follows it (`decisions.md` 50); a failure
/// is remembered, never an error of the append.
fn follow(rt: &Runtime, a: &mut Attachment, in_place: bool) -> Result<bool, ErrorCode> {
    a.meta_failed = !super::meta::write(rt, a);
    Ok(in_place)
}

/// [`append`] for records no history entry shows (a `title`): when the snapshot was current
/// and the attachment's state took the records in place (no other writer, no failed write),
/// the snapshot keeps its revision, now naming the file as it is after the write, so a
/// revision already handed out (`run.finished`'s) still pages the same entries.
pub fn append_unseen(
    rt: &Runtime,
    a: &mut Attachment,
    records: &[Record],
) -> Result<(), ErrorCode> {
    let current = !a.snapshot.stale;
    if !extend(rt, a, records)? || !current {
        return Ok(());
    }
    if let Some(h) = a.history.as_ref() {
        // The records add no entry, but they may move the window: then the revision goes stale.
        if h.project().is_ok_and(|p| p == a.snapshot.projection) {
            a.snapshot.stale = false;
        }
    }
    Ok(())
}

/// [`append`]; `Ok(true)` when the attachment's state was extended in place rather than
/// rebuilt from the file.
fn extend(rt: &Runtime, a: &mut Attachment, records: &[Record]) -> Result<bool, ErrorCode> {
    let sessions = Sessions::new(&rt.root);
    if !sessions.is_safe() {
        return Err(ErrorCode::PersistenceFailed);
    }
    let path = sessions.history_path(&a.id);
    let mut created = None;
    if !a.durable {
        let lease = Lease::acquire(&sessions, &a.id, LeaseKind::Writer)
            .map_err(|_| ErrorCode::PersistenceFailed)?;
        let mut meta = Record::now(a.id.as_str(), Body::SessionMeta {});
        meta.cwd = Some(rt.cwd.to_string_lossy().into_owned());
        // The file appears only with its whole `session_meta` line: a failure (ENOSPC) leaves
        // no name, so this ID stays lazy and a later append can still create it.
        let appender = Appender::create(&path, std::slice::from_ref(&meta))
            .map_err(|_| ErrorCode::PersistenceFailed)?;
        a.writer = Some(lease);
        a.appender = Some(appender);
        a.durable = true;
        created = Some(meta);
    }
    let _append_lease = Lease::acquire(&sessions, &a.id, LeaseKind::Append)
        .map_err(|_| ErrorCode::PersistenceFailed)?;
    if a.appender.is_none() {
        a.appender = Some(Appender::open(&path).map_err(|_| ErrorCode::PersistenceFailed)?);
    }
    let appender = a.appender.as_mut().ok_or(ErrorCode::PersistenceFailed)?;
    if created.is_none() && appender.identity().ok() != a.snapshot.identity {
        // Someone else wrote since: our state lacks their records.
        a.history = None;
    }
    // Our own write moves the history on: the snapshot is stale until refreshed.
    a.snapshot.stale = true;
    if appender.append(records).is_err() {
        // Whole lines may have landed without their fsync: the state no longer mirrors the file.
        a.history = None;
        return Err(ErrorCode::PersistenceFailed);
    }
    match appender.identity() {
        Ok(identity) => a.snapshot.identity = Some(identity),
        Err(_) => a.history = None,
    }
    match a.history.as_mut() {
        Some(h) => {
            h.appended();
            for r in created.iter().chain(records) {
                // A refusal sticks in the state; refresh and replay report it.
                if h.push(r, line_len(r)).is_err() {
                    break;
                }
            }
            a.turns = h.summary().turns;
            follow(rt, a, true)
        }
        None => {
            // On failure the state stays absent: refresh retries, replay reports it.
            let _ = rebuild(rt, a, &Cancel::default());
            follow(rt, a, false)
        }
    }
}

/// What a run may add to the attachment's projection: the per-run bounds alone
/// (`decisions.md` 48), since the projection window shows the newest turns that fit and so
/// never refuses a turn for what earlier turns hold.
#[must_use]
pub const fn room(_a: &Attachment) -> Room {
    Room::unbounded()
}

/// Before a turn: re-derives the state a failed append dropped from the file
/// (`decisions.md` 23). A torn tail is ignored by the read and cut before the next append, and
/// a turn left open there is closed as interrupted, so the session goes on instead of
/// answering `session_invalid` until it is reopened.
pub fn recover(rt: &Runtime, a: &mut Attachment, cancel: &Cancel) -> Result<(), ErrorCode> {
    if a.history.is_some() || !a.durable {
        return Ok(());
    }
    rebuild(rt, a, cancel)?;
    if let Some(h) = a.history.as_mut() {
        h.close_open_turn();
    }
    // What the file holds now differs from any revision handed out before the failure.
    a.snapshot.stale = true;
    Ok(())
}

/// The replay a turn starts from. An open defers it (`Items::Deferred`): the first turn that
/// needs it reads the window again; so does one whose window dropped the compaction that
/// freed items it now needs, then keeping every turn's items.
pub fn snapshot(
    rt: &Runtime,
    a: &mut Attachment,
    cancel: &Cancel,
) -> Result<crate::history::compact::Snapshot, ErrorCode> {
    let h = a.history.as_ref().ok_or(ErrorCode::SessionInvalid)?;
    match h.snapshot() {
        Err(crate::history::HistoryError::Evicted) => {}
        other => return other.map_err(ErrorCode::from),
    }
    for items in [Items::Needed, Items::All] {
        let mut loaded = load_with(rt, &a.id, items, cancel)?;
        // Before a turn no live loop owns a turn left open in the file (a crash): it closes
        // as interrupted, as at open.
        loaded.history.close_open_turn();
        let snap = loaded.history.snapshot();
        a.turns = loaded.history.summary().turns;
        a.snapshot.identity = Some(loaded.identity);
        a.history = Some(loaded.history);
        match snap {
            Err(crate::history::HistoryError::Evicted) => {}
            other => return other.map_err(ErrorCode::from),
        }
    }
    Err(ErrorCode::SessionInvalid)
}

/// Rebuilds the attachment's derived state and snapshot projection from the file.
fn rebuild(rt: &Runtime, a: &mut Attachment, cancel: &Cancel) -> Result<(), ErrorCode> {
    let loaded = load(rt, &a.id, cancel)?;
    a.turns = loaded.history.summary().turns;
    a.snapshot.projection = loaded.projection;
    a.snapshot.identity = Some(loaded.identity);
    a.history = Some(loaded.history);
    Ok(())
}

/// The revision `input.persisted` acknowledges: the snapshot refreshed right after the input's
/// append, so the revision names the history as of the input and the input is part of the
/// projection it names (local-agent-protocol.md: the input "identifies its persisted
/// projection within the acknowledgement revision"). Like every revision it goes stale with
/// the run's next append. When the projection cannot be rebuilt (`history_limit`) the snapshot
/// stays stale and the acknowledgement gets a fresh revision that pages nothing.
pub fn acknowledge(rt: &Runtime, a: &mut Attachment) -> String {
    refresh(rt, a, &Cancel::default()).unwrap_or_else(|_| fresh_revision())
}

/// Gives the attachment a new snapshot revision after its own appends, extending the
/// projection by what changed (or rebuilding it from the file when the state was dropped);
/// returns the new revision. `history_limit` past the snapshot bounds.
pub fn refresh(rt: &Runtime, a: &mut Attachment, cancel: &Cancel) -> Result<String, ErrorCode> {
    a.snapshot.stale = true;
    match a.history.as_ref() {
        Some(h) => a.snapshot.projection = h.project()?,
        None => rebuild(rt, a, cancel)?,
    }
    a.snapshot.revision = fresh_revision();
    a.snapshot.stale = false;
    Ok(a.snapshot.revision.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{create, page, SessionState};

    #[test]
    fn the_input_acknowledgement_revision_pages_the_history_as_of_the_input() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sessions")).unwrap();
        let rt = Runtime::for_tests(d.path(), d.path());
        let mut st = SessionState::default();
        let created = create(&rt, &mut st).unwrap().0;
        let sid = created["session_id"].as_str().unwrap().to_owned();
        let a = st.attachment.as_mut().unwrap();
        let input = Record::now(
            &sid,
            Body::UserInput {
                run_id: "r1".into(),
                message_id: Some("u-1".into()),
                text: "hello there".into(),
            },
        );
        append(&rt, a, std::slice::from_ref(&input)).unwrap();
        let revision = acknowledge(&rt, a);
        assert_ne!(revision, created["revision"].as_str().unwrap());
        let got = page(&rt, &mut st, &sid, &revision, None).unwrap().0;
        assert_eq!(got["revision"], revision.as_str());
        let entries = got["entries"].as_array().unwrap();
        assert_eq!(entries[0]["kind"], "user");
        assert_eq!(entries[0]["text"], "hello there");
        // The turn is still open: the projection says so and is not complete.
        assert_eq!(entries.last().unwrap()["kind"], "diagnostic");
        assert_eq!(got["complete"], false);
        // The run's next append makes it stale, as every revision.
        let a = st.attachment.as_mut().unwrap();
        let done = Record::now(
            &sid,
            Body::RunFinished {
                run_id: "r1".into(),
                outcome: crate::run::RunOutcome::Completed,
                error_code: None,
            },
        );
        append(&rt, a, std::slice::from_ref(&done)).unwrap();
        assert_eq!(
            page(&rt, &mut st, &sid, &revision, None).unwrap_err(),
            ErrorCode::StaleRevision
        );
    }

    #[test]
    fn a_dropped_state_is_recovered_from_the_file_and_the_torn_tail_cut() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sessions")).unwrap();
        let rt = Runtime::for_tests(d.path(), d.path());
        let mut st = SessionState::default();
        let sid = create(&rt, &mut st).unwrap().0["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let a = st.attachment.as_mut().unwrap();
        let input = |run: &str| {
            Record::now(
                &sid,
                Body::UserInput {
                    run_id: run.into(),
                    message_id: None,
                    text: format!("in {run}"),
                },
            )
        };
        append(&rt, a, &[input("r1")]).unwrap();
        assert_eq!(a.turns, 1);
        // What a failed append leaves: a torn line, and no derived state.
        let path = Sessions::new(&rt.root).history_path(&a.id);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"type\":\"user_in")
            .unwrap();
        a.history = None;
        assert_eq!(a.first_turn().unwrap_err(), ErrorCode::SessionInvalid);
        recover(&rt, a, &Cancel::default()).unwrap();
        assert!(a.first_turn().is_ok());
        assert_eq!(a.turns, 1, "the stored turn, not the fragment");
        assert!(a.snapshot.stale);
        // The appender cuts the fragment (it is told to check after a failed write).
        a.appender = Some(Appender::open(&path).unwrap());
        append(&rt, a, &[input("r2")]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 3);
        assert_eq!(bytes.last(), Some(&b'\n'));
        for line in bytes[..bytes.len() - 1].split(|b| *b == b'\n') {
            serde_json::from_slice::<serde_json::Value>(line).expect("a whole record");
        }
        assert_eq!(a.turns, 2);
        // A lazy handle has nothing to recover.
        create(&rt, &mut st).unwrap();
        let a = st.attachment.as_mut().unwrap();
        a.history = None;
        recover(&rt, a, &Cancel::default()).unwrap();
        assert!(a.history.is_none());
    }
}

//! The typed client (`magi_code::client`) against a real child over real pipes: a whole
//! conversation (an approval, a cancel, history, a relaunch that reopens the saved session)
//! and each client rule of the protocol as the client enforces it: IDs never reused, a delta
//! then its reconciliation shown once, a session offered for saving only after a durable
//! acknowledgement.

use crate::common::{write_script, Env, STEP};
use magi_code::client::{Client, ClientError, Turn, Update};
use magi_code::wire::events::{Outcome, Persistence};
use magi_code::wire::requests::{
    ApprovalAnswerParams, EmptyParams, HistoryPageParams, SessionOpenParams, TurnCancelParams,
};
use magi_code::wire::results::{
    CancelResult, EntryKind, HistoryPageResult, RecordedResult, SessionResult, Status,
};
use magi_code::wire::{Call, Event};
use serde_json::json;
use std::process::Stdio;
use std::time::{Duration, Instant};

const CAPS: [&str; 7] = [
    "session.create",
    "session.open",
    "turn.start",
    "turn.cancel",
    "approval.answer",
    "history.page",
    "shutdown",
];

fn spawn(env: &Env) -> Client {
    let mut cmd = env.command(&["serve", "--stdio"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut c = Client::spawn(cmd).expect("spawn magi-code");
    c.set_wait(Some(STEP));
    let init = c.initialize(&CAPS).expect("initialize");
    assert_eq!(init.status.readiness, "ready");
    c
}

/// The next event within [`STEP`].
#[track_caller]
fn event(c: &mut Client) -> Event {
    let end = Instant::now() + STEP;
    while Instant::now() < end {
        if let Some(e) = c.next_event(Duration::from_millis(50)).expect("event") {
            return e;
        }
    }
    panic!("no event within {STEP:?}");
}

/// Feeds events to `turn` until its `run.finished`, answering approvals with `allow`;
/// returns how many deltas and reconciliations it saw.
#[track_caller]
fn finish(c: &mut Client, turn: &mut Turn, sid: &str, allow: bool) -> (usize, usize) {
    let (mut deltas, mut reconciled) = (0, 0);
    loop {
        let e = event(c);
        match turn.apply(&e).expect("run rules") {
            Update::Delta { .. } => deltas += 1,
            Update::Reconciled { .. } => reconciled += 1,
            Update::Finished => return (deltas, reconciled),
            Update::Other => {}
        }
        if let Event::ApprovalRequested(a) = e {
            let answer = Call::ApprovalAnswer(ApprovalAnswerParams {
                session_id: sid.to_owned(),
                run_id: a.run_id,
                approval_id: a.approval_id,
                allow,
            });
            let _: RecordedResult = c.call(answer).expect("the answer wins");
        }
    }
}

fn create(c: &mut Client) -> String {
    let r: SessionResult = c.call(Call::SessionCreate(EmptyParams {})).unwrap();
    assert!(!r.durable, "session.create is lazy");
    r.session_id
}

fn kinds(c: &mut Client, sid: &str, revision: &str) -> Vec<EntryKind> {
    let page: HistoryPageResult = c
        .call(Call::HistoryPage(HistoryPageParams {
            session_id: sid.to_owned(),
            revision: revision.to_owned(),
            cursor: None,
        }))
        .expect("history.page");
    assert!(page.complete);
    page.entries.iter().map(|e| e.kind).collect()
}

#[test]
fn a_whole_conversation_with_an_approval_a_cancel_and_a_relaunch() {
    let env = Env::new();
    let turns = json!([
        {"steps": [
            {"text": "I will create notes.txt."},
            {"tool": {"name": "write_file", "input": {"path": "notes.txt", "content": "hello\n"}}},
            {"text": "Created notes.txt."}
        ]},
        {"steps": [{"sleep_ms": 60000}]}
    ]);
    write_script(&env, turns, None);
    let mut c = spawn(&env);
    let sid = create(&mut c);
    assert_eq!(c.attached_session(), Some(sid.as_str()));
    assert_eq!(c.saved_session(), None, "created, never persisted");

    let mut turn = c
        .start_turn(&sid, "Create notes.txt saying hello.")
        .unwrap();
    let first = event(&mut c);
    assert!(matches!(&first, Event::InputPersisted(d) if d.run_id == turn.run_id()));
    turn.apply(&first).unwrap();
    assert_eq!(
        c.saved_session(),
        Some(sid.as_str()),
        "after input.persisted"
    );
    let (_, reconciled) = finish(&mut c, &mut turn, &sid, true);
    assert_eq!(reconciled, 2, "two assistant messages, a tool call between");
    assert_eq!(turn.text(), "I will create notes.txt.Created notes.txt.");
    let done = turn.finished().unwrap().clone();
    assert_eq!(done.outcome, Outcome::Completed);
    assert_eq!(done.persistence, Persistence::Durable);
    assert_eq!(
        std::fs::read_to_string(env.cwd.join("notes.txt")).unwrap(),
        "hello\n"
    );

    // Stop: the cancel is acknowledged, and the run still ends with its own terminal.
    let mut stop = c.start_turn(&sid, "Now wait for a minute.").unwrap();
    assert!(matches!(event(&mut c), Event::InputPersisted(_)));
    let cancel = Call::TurnCancel(TurnCancelParams {
        session_id: sid.clone(),
        run_id: stop.run_id().to_owned(),
    });
    let _: CancelResult = c.call(cancel).unwrap();
    finish(&mut c, &mut stop, &sid, false);
    assert_eq!(stop.finished().unwrap().outcome, Outcome::Cancelled);
    assert_eq!(
        c.next_event(Duration::from_millis(200)).unwrap(),
        None,
        "nothing after the terminal"
    );
    let revision = stop.finished().unwrap().revision.clone().unwrap();
    let seen = kinds(&mut c, &sid, &revision);
    use EntryKind::{Activity, Assistant, Diagnostic, User};
    let want = [User, Assistant, Activity, Assistant, User, Diagnostic];
    assert_eq!(seen, want);
    let saved = c.saved_session().unwrap().to_owned();
    assert_eq!(c.shutdown(STEP), 0);

    // Relaunch: a new child knows no session until the saved one is opened.
    let mut c = spawn(&env);
    assert_eq!(c.saved_session(), None);
    let open: SessionResult = c
        .call(Call::SessionOpen(SessionOpenParams {
            session_id: saved.clone(),
        }))
        .unwrap();
    assert!(open.durable);
    assert_eq!(c.saved_session(), Some(saved.as_str()));
    assert_eq!(kinds(&mut c, &saved, &open.revision), want);
    assert_eq!(c.shutdown(STEP), 0);
}

#[test]
fn a_session_never_persisted_is_not_offered_and_is_gone_after_a_relaunch() {
    let env = Env::new();
    let mut c = spawn(&env);
    let sid = create(&mut c);
    assert_eq!(c.saved_session(), None);
    assert_eq!(c.shutdown(STEP), 0);
    let mut c = spawn(&env);
    let open = c.call::<SessionResult>(Call::SessionOpen(SessionOpenParams { session_id: sid }));
    assert_eq!(open.unwrap_err().code(), Some("session_missing"));
    assert_eq!(c.saved_session(), None);
}

#[test]
fn echo_deltas_are_replaced_by_the_reconciled_text_once() {
    let env = Env::new();
    let mut c = spawn(&env);
    let sid = create(&mut c);
    let prompt = "Hello there, typed client: stream me and then reconcile me.";
    let mut turn = c.start_turn(&sid, prompt).unwrap();
    let (deltas, reconciled) = finish(&mut c, &mut turn, &sid, false);
    assert!(deltas >= 1, "the echo model streams");
    assert_eq!(reconciled, 1);
    assert_eq!(turn.text(), prompt, "replaced, not appended");
    assert_eq!(turn.messages().len(), 1);
    assert!(!turn.messages()[0].incomplete());
}

#[test]
fn request_ids_are_never_reused() {
    let env = Env::new();
    let mut c = spawn(&env);
    // `initialize` took the first fresh ID.
    let status = Call::Status(EmptyParams {});
    assert_eq!(
        c.send_with_id("c1", status.clone()),
        Err(ClientError::IdReused)
    );
    c.send_with_id("mine", status.clone()).unwrap();
    assert_eq!(
        c.send_with_id("mine", status.clone()),
        Err(ClientError::IdReused),
        "even after its response"
    );
    // Had a refused ID been written, its `duplicate_id` answer would correlate to nothing
    // and fail this client closed; instead calls go on.
    let s: Status = c.call(status.clone()).unwrap();
    assert_eq!(s.readiness, "ready");
    let id = c.send(status.clone()).unwrap();
    assert_ne!(id, "mine");
    assert_ne!(id, "c1");
    // Polling without blocking: the response arrives under its own ID.
    let polled = crate::common::poll::within(STEP, || c.try_response::<Status>(&id))
        .unwrap_or_else(|| panic!("no response to {id}"))
        .unwrap();
    assert_eq!(polled.readiness, "ready");
    assert!(c.try_response::<Status>(&id).is_none(), "taken once");
    assert_eq!(c.ids_used(), 4);
    // Asking for another method's result type is refused before anything is written.
    assert_eq!(
        c.call::<SessionResult>(status).unwrap_err(),
        ClientError::WrongResultType("status")
    );
    assert_eq!(c.ids_used(), 4);
    assert_eq!(c.shutdown(STEP), 0);
}

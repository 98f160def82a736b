//! The attachment's history state, extended per append, against a fresh read of the file: the
//! same projection entries (and layout), the same replay, the same identity; a foreign writer is
//! still caught by file identity and then read back in.

use crate::runtime;
use magi_code::{
    history::{
        replay::{INTERRUPTED_RESULT, NO_REPLY_CANCELLED, NO_REPLY_INTERRUPTED},
        ActivityKind, ActivityState, Body, History, Item, Record, RunOutcome,
    },
    session::{self as sessions, load::load, SessionState},
    util::cancel::Cancel,
};
use protocol_core::ErrorCode;
use serde_json::json;
use std::io::Write;

/// The conversation a turn would start from: every item (no compaction in these histories).
fn replayed(h: &History) -> Vec<Item> {
    let s = h.snapshot().unwrap();
    assert!(s.summary.is_none());
    s.after
}

/// The records of turn `n`, in the batches a loop appends them: the input alone, then the rest.
/// Turn kinds cycle: completed with tools, failed with a partial reply, cancelled mid-call,
/// interrupted (never finished), completed plain.
fn turn(id: &str, n: usize) -> Vec<Vec<Record>> {
    let run = format!("r{n}");
    let r = |body| Record::now(id, body);
    let input = vec![r(Body::UserInput {
        run_id: run.clone(),
        message_id: Some(format!("u{n}")),
        text: format!("question {n}"),
    })];
    let activity = |state| {
        r(Body::Activity {
            run_id: run.clone(),
            activity_id: format!("t{n}"),
            kind: ActivityKind::Tool,
            state,
            name: "read_file".into(),
            summary: Some("a.txt".into()),
        })
    };
    let call = r(Body::ToolCall {
        run_id: run.clone(),
        call_id: format!("c{n}"),
        name: "read_file".into(),
        input: json!({"path": "a.txt"}),
    });
    let result = r(Body::ToolResult {
        run_id: run.clone(),
        call_id: format!("c{n}"),
        output: "contents".into(),
        is_error: false,
    });
    let message = |text: &str, partial| {
        r(Body::AssistantMessage {
            run_id: run.clone(),
            message_id: format!("a{n}-{}", text.len()),
            text: Some(text.into()),
            partial,
        })
    };
    let finished = |outcome, code: Option<&str>| {
        r(Body::RunFinished {
            run_id: run.clone(),
            outcome,
            error_code: code.map(str::to_owned),
        })
    };
    let rest = match n % 5 {
        0 => vec![
            r(Body::ProviderItem {
                run_id: run.clone(),
                provider: "anthropic".into(),
                item: json!({"type": "thinking", "thinking": "", "signature": "sig"}),
            }),
            message("let me look", false),
            activity(ActivityState::Started),
            call.clone(),
            result,
            activity(ActivityState::Completed),
            r(Body::Usage {
                run_id: run.clone(),
                input_tokens: 100 + n as u64,
                output_tokens: 7,
                cached_input_tokens: Some(3),
                cache_creation_input_tokens: None,
            }),
            r(Body::ReasoningSummary {
                run_id: run.clone(),
                text: "planned".into(),
                item_id: Some("i".into()),
                provider_summary: Some(true),
            }),
            message(&"long reply ".repeat(3000), false),
            finished(RunOutcome::Completed, None),
        ],
        1 => vec![
            r(Body::AssistantChunk {
                run_id: run.clone(),
                message_id: format!("a{n}-7"),
                text: "par".into(),
            }),
            message("partial", true),
            finished(RunOutcome::Failed, Some("execution_failed")),
        ],
        2 => vec![
            activity(ActivityState::Started),
            call,
            activity(ActivityState::Failed),
            finished(RunOutcome::Cancelled, None),
        ],
        // Interrupted: the loop died after its call (kill -9); the next turn goes on.
        3 => vec![activity(ActivityState::Started), call],
        _ => vec![
            message("plain", false),
            finished(RunOutcome::Completed, None),
        ],
    };
    vec![input, rest]
}

#[test]
fn extending_the_attachment_equals_a_fresh_load() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let rt = runtime(home.path(), cwd.path());
    let mut st = SessionState::default();
    sessions::create(&rt, &mut st).unwrap();
    let id = st.attachment.as_ref().unwrap().id.as_str().to_owned();
    let file = home.path().join("sessions").join(format!("{id}.jsonl"));
    for n in 0..25 {
        let a = st.attachment.as_mut().unwrap();
        for batch in turn(&id, n) {
            sessions::append(&rt, a, &batch).unwrap();
        }
        let revision = sessions::refresh(&rt, a, &Cancel::default()).unwrap();
        let fresh = load(&rt, &a.id, &Cancel::default()).unwrap();
        assert_eq!(a.snapshot.projection, fresh.projection, "turn {n}");
        assert_eq!(a.snapshot.identity, Some(fresh.identity), "turn {n}");
        assert_eq!(
            replayed(a.history.as_ref().unwrap()),
            replayed(&fresh.history),
            "turn {n}"
        );
        assert_eq!(a.turns, n + 1);
        // The in-memory snapshot pages under its new revision.
        let page = sessions::page(&rt, &mut st, &id, &revision, None)
            .unwrap()
            .0;
        assert_eq!(page["revision"], revision.as_str());
    }
    let a = st.attachment.as_ref().unwrap();
    assert!(!a.snapshot.projection.complete, "an interrupted turn stays");
    let kinds: Vec<String> = a
        .snapshot
        .projection
        .entries
        .iter()
        .map(|e| serde_json::from_str::<serde_json::Value>(e).unwrap()["kind"].to_string())
        .collect();
    assert!(kinds.iter().filter(|k| *k == "\"diagnostic\"").count() >= 10);
    let items = replayed(a.history.as_ref().unwrap());
    let notes = |t: &str| {
        items
            .iter()
            .filter(|i| matches!(i, Item::Assistant { text } if text == t))
            .count()
    };
    assert_eq!(
        notes(NO_REPLY_INTERRUPTED),
        5,
        "each interrupted turn, closed by the next"
    );
    assert_eq!(notes(NO_REPLY_CANCELLED), 5);
    assert_eq!(
        items
            .iter()
            .filter(|i| matches!(i, Item::ToolResult { output, is_error: true, .. } if output == INTERRUPTED_RESULT))
            .count(),
        10,
        "calls of cancelled and interrupted turns are answered"
    );

    // Another writer appends: the page check catches it by identity...
    let revision = a.snapshot.revision.clone();
    let foreign = Record::now(
        &id,
        Body::Title {
            title: "by someone else".into(),
        },
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    writeln!(f, "{}", serde_json::to_string(&foreign).unwrap()).unwrap();
    drop(f);
    assert_eq!(
        sessions::page(&rt, &mut st, &id, &revision, None).unwrap_err(),
        ErrorCode::StaleRevision
    );
    // ...and our next append reads its records back in instead of missing them.
    let a = st.attachment.as_mut().unwrap();
    for batch in turn(&id, 25) {
        sessions::append(&rt, a, &batch).unwrap();
    }
    sessions::refresh(&rt, a, &Cancel::default()).unwrap();
    let fresh = load(&rt, &a.id, &Cancel::default()).unwrap();
    assert_eq!(a.snapshot.projection, fresh.projection);
    assert_eq!(
        replayed(a.history.as_ref().unwrap()),
        replayed(&fresh.history)
    );
    assert_eq!(
        a.history.as_ref().unwrap().summary().title.as_deref(),
        Some("by someone else")
    );
}

#[test]
fn a_projection_past_the_snapshot_budget_shows_the_newest_turns_and_keeps_the_replay() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let rt = runtime(home.path(), cwd.path());
    let mut st = SessionState::default();
    sessions::create(&rt, &mut st).unwrap();
    let a = st.attachment.as_mut().unwrap();
    let id = a.id.as_str().to_owned();
    // Each turn projects two 1 MiB entries (user and reply): from the fourth on, 8 MiB no
    // longer holds them all with their JSON, and the projection window shows the newest turns
    // that fit.
    let big = "x".repeat(1 << 20);
    for n in 0..8 {
        let run = format!("r{n}");
        let records = [
            Body::UserInput {
                run_id: run.clone(),
                message_id: None,
                text: big.clone(),
            },
            Body::AssistantMessage {
                run_id: run.clone(),
                message_id: format!("a{n}"),
                text: Some(big.clone()),
                partial: false,
            },
            Body::RunFinished {
                run_id: run,
                outcome: RunOutcome::Completed,
                error_code: None,
            },
        ]
        .map(|b| Record::now(&id, b));
        sessions::append(&rt, a, &records).unwrap();
        sessions::refresh(&rt, a, &Cancel::default()).unwrap();
        let p = &a.snapshot.projection;
        assert!(p.bytes() <= 8 << 20);
        let first: serde_json::Value = serde_json::from_str(&p.entries[0]).unwrap();
        assert_eq!(first["kind"] == "diagnostic", n >= 3, "turn {n}");
        assert_eq!(p.complete, n < 3, "turn {n}");
        let fresh = load(&rt, &a.id, &Cancel::default()).unwrap();
        assert_eq!(*p, fresh.projection, "a fresh load agrees");
    }
    assert_eq!(replayed(a.history.as_ref().unwrap()).len(), 16);
}

#[test]
fn opening_a_history_cut_mid_loop_replays_a_valid_conversation() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let rt = runtime(home.path(), cwd.path());
    let mut st = SessionState::default();
    sessions::create(&rt, &mut st).unwrap();
    let a = st.attachment.as_mut().unwrap();
    let id = a.id.as_str().to_owned();
    // Turn 3 of the cycle dies after its call (kill -9): no result, no run_finished.
    for batch in turn(&id, 3) {
        sessions::append(&rt, a, &batch).unwrap();
    }
    drop(st);
    let mut st = SessionState::default();
    sessions::open(&rt, &mut st, &id, &Cancel::default()).unwrap();
    // An open defers the replay; the turn that needs it reads the window again.
    let a = st.attachment.as_mut().unwrap();
    assert!(a.history.as_ref().unwrap().snapshot().is_err());
    let items = sessions::snapshot(&rt, a, &Cancel::default())
        .unwrap()
        .after;
    assert_eq!(items.len(), 4, "{items:?}");
    assert!(matches!(&items[0], Item::User { .. }));
    assert!(matches!(&items[1], Item::ToolCall { call_id, .. } if call_id == "c3"));
    assert!(matches!(
        &items[2],
        Item::ToolResult { call_id, output, is_error: true } if call_id == "c3" && output == INTERRUPTED_RESULT
    ));
    assert!(matches!(&items[3], Item::Assistant { text } if text == NO_REPLY_INTERRUPTED));
    // The next turn follows the note: no two user messages in a row.
    let a = st.attachment.as_mut().unwrap();
    for batch in turn(&id, 4) {
        sessions::append(&rt, a, &batch).unwrap();
    }
    let got = replayed(a.history.as_ref().unwrap());
    assert!(matches!(&got[4], Item::User { .. }));
    let fresh = load(&rt, &a.id, &Cancel::default()).unwrap();
    assert_eq!(got, replayed(&fresh.history));
}

//! The `tool.cards` extension over real pipes (extensions.md "tool.cards",
//! docs/extensions/tool-cards.md): the negotiated descriptor, live `tool.card` events right
//! after each tool `activity`, card fields per kind, and `tool_card` history entries after a
//! reopen — and base clients seeing none of it.

use crate::common::{
    entry_kinds, history_entries, result, start_session, start_with_result, until_finished,
    write_script, Env, Server,
};
use serde_json::{json, Value};

const ALL_ALLOWED: fn() -> Value = || json!({"read": "allow", "write": "allow", "shell": "allow"});

/// One turn calling every card kind the built-ins produce, then an unknown tool.
fn script(env: &Env) {
    write_script(
        env,
        json!([{"steps": [
            {"tool": {"name": "write_file", "input": {"path": "notes/a.txt", "content": "one\ntwo\n"}}},
            {"tool": {"name": "edit_file", "input": {"path": "notes/a.txt", "old": "two\n", "new": "2\n3\n4\n"}}},
            {"tool": {"name": "read_file", "input": {"path": "notes/a.txt"}}},
            {"tool": {"name": "grep", "input": {"pattern": "^[0-9]", "path": "notes"}}},
            {"tool": {"name": "shell", "input": {"command": "exit 3"}}},
            {"tool": {"name": "frobnicate", "input": {}}},
            {"text": "done"},
        ]}]),
        Some(ALL_ALLOWED()),
    );
}

/// Runs one turn on `sid`; returns the frames until `run.finished` (included).
fn turn(s: &mut Server, sid: &str) -> Vec<Value> {
    s.request(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": "go"}),
    );
    until_finished(s)
}

fn expected_cards() -> Vec<Value> {
    vec![
        json!({"kind": "file_edit", "title": "Write notes/a.txt", "status": "completed", "path": "notes/a.txt", "added": 2, "removed": 0}),
        json!({"kind": "file_edit", "title": "Edit notes/a.txt", "status": "completed", "path": "notes/a.txt", "added": 3, "removed": 1}),
        json!({"kind": "file_read", "title": "Read notes/a.txt", "status": "completed", "path": "notes/a.txt", "lines": 4}),
        json!({"kind": "search", "title": "Search ^[0-9] in notes", "status": "completed", "pattern": "^[0-9]", "path": "notes", "matches": 3}),
        json!({"kind": "command", "title": "$ exit 3", "status": "failed", "command": "exit 3", "exit_code": 3}),
        json!({"kind": "generic", "title": "frobnicate", "status": "failed"}),
    ]
}

/// A final card with the command's `duration_ms` (a wall time) checked and removed.
fn without_duration(mut card: Value) -> Value {
    if card["kind"] == "command" {
        assert!(card["duration_ms"].is_u64(), "{card}");
        card.as_object_mut().unwrap().remove("duration_ms");
    }
    card
}

#[test]
fn negotiated_cards_follow_each_activity_and_are_saved() {
    let env = Env::new();
    script(&env);
    let (mut s, init) = start_with_result(&env, &["tool.cards"]);
    assert_eq!(
        init["extensions"],
        json!({"tool.cards": {"version": 1, "kinds": ["command", "file_read", "file_edit", "search", "mcp", "client", "subagent", "generic"], "card_bytes": 4096}})
    );
    assert_eq!(
        init["capabilities"].as_array().unwrap().last().unwrap(),
        "tool.cards"
    );
    let sid = result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let frames = turn(&mut s, &sid);
    let run_id = result(&frames[0])["run_id"].as_str().unwrap().to_owned();
    let fin = frames.last().unwrap();
    assert_eq!(fin["data"]["outcome"], "completed");
    // Every tool activity is followed at once by its card: started → running, then final.
    let events: Vec<&Value> = frames.iter().filter(|f| f["type"] == "event").collect();
    let mut finals = Vec::new();
    for (i, f) in events.iter().enumerate() {
        if f["event"] == "tool.card" {
            let prev = events[i - 1];
            assert_eq!(prev["event"], "activity", "a card follows an activity: {f}");
            let d = &f["data"];
            let mut keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(keys, ["activity_id", "card", "run_id", "session_id"]);
            assert_eq!(
                (&d["session_id"], &d["run_id"]),
                (&json!(sid), &json!(run_id))
            );
            assert_eq!(d["activity_id"], prev["data"]["activity_id"]);
            let status = match prev["data"]["state"].as_str().unwrap() {
                "started" => "running",
                other => other,
            };
            assert_eq!(d["card"]["status"], status);
            assert!(d["card"].to_string().len() <= 4096);
            if status != "running" {
                finals.push(without_duration(d["card"].clone()));
            }
        } else if f["event"] == "activity" {
            assert_eq!(events[i + 1]["event"], "tool.card", "{f}");
        }
    }
    assert_eq!(finals, expected_cards());
    let running: Vec<&&Value> = events
        .iter()
        .filter(|f| f["event"] == "tool.card" && f["data"]["card"]["status"] == "running")
        .collect();
    assert_eq!(running.len(), 6);
    assert_eq!(
        running[4]["data"]["card"],
        json!({"kind": "command", "title": "$ exit 3", "status": "running", "command": "exit 3", "exit_code": null, "duration_ms": null})
    );
    assert_eq!(running[0]["data"]["card"]["added"], 0);
    let rev = fin["data"]["revision"].as_str().unwrap().to_owned();
    let live = history_entries(&mut s, "p", &sid, &rev);
    s.shutdown_ok("q");

    // A new child that negotiated cards sees each card entry right after its activity.
    let (mut s, _) = start_with_result(&env, &["tool.cards"]);
    let opened = s.call("o", "session.open", &json!({"session_id": sid}));
    let rev = result(&opened)["revision"].as_str().unwrap().to_owned();
    let reopened = history_entries(&mut s, "p", &sid, &rev);
    let mut want = vec!["user"];
    want.extend(["activity", "tool_card"].repeat(6));
    want.push("assistant");
    assert_eq!(entry_kinds(&reopened), want);
    assert_eq!(
        entry_kinds(&live),
        want,
        "the live projection matches the reopened one"
    );
    let cards: Vec<Value> = reopened
        .iter()
        .filter(|e| e["kind"] == "tool_card")
        .map(|e| {
            assert_eq!(e["text"], e["card"]["title"]);
            assert_eq!((&e["part"], &e["last_part"]), (&json!(0), &json!(true)));
            assert_eq!(e["partial"], false);
            without_duration(e["card"].clone())
        })
        .collect();
    assert_eq!(cards, expected_cards());
    s.shutdown_ok("q");

    // A base child reopening the same session sees no card entries.
    let (mut s, init) = start_with_result(&env, &[]);
    assert!(init.get("extensions").is_none());
    let opened = s.call("o", "session.open", &json!({"session_id": sid}));
    let rev = result(&opened)["revision"].as_str().unwrap().to_owned();
    let mut base = vec!["user"];
    base.extend(["activity"].repeat(6));
    base.push("assistant");
    assert_eq!(entry_kinds(&history_entries(&mut s, "p", &sid, &rev)), base);
    s.shutdown_ok("q");
}

#[test]
fn base_clients_see_no_cards_but_cards_are_stored() {
    let env = Env::new();
    script(&env);
    let (mut s, sid) = start_session(&env, &[]);
    let frames = turn(&mut s, &sid);
    assert!(frames.iter().all(|f| f["event"] != "tool.card"));
    assert_eq!(
        frames.iter().filter(|f| f["event"] == "activity").count(),
        12
    );
    let rev = frames.last().unwrap()["data"]["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    let live = history_entries(&mut s, "p", &sid, &rev);
    assert!(live
        .iter()
        .all(|e| e["kind"] != "tool_card" && e.get("card").is_none()));
    s.shutdown_ok("q");
    // Cards were stored anyway: a child that negotiates them later shows them.
    let (mut s, _) = start_with_result(&env, &["tool.cards"]);
    let opened = s.call("o", "session.open", &json!({"session_id": sid}));
    let rev = result(&opened)["revision"].as_str().unwrap().to_owned();
    let cards = history_entries(&mut s, "p", &sid, &rev)
        .into_iter()
        .filter(|e| e["kind"] == "tool_card")
        .count();
    assert_eq!(cards, 6);
    s.shutdown_ok("q");
}

/// extensions.md: `tool.cards` counts toward the sixteen names unless `client.tools` is there.
#[test]
fn tool_cards_beside_fifteen_base_names_and_not_sixteen() {
    let env = Env::new();
    let base = [
        "initialize",
        "status",
        "shutdown",
        "session.create",
        "session.open",
        "session.list",
        "session.discover",
        "model.catalog",
        "model.catalog.status",
        "model.refresh",
        "operation.cancel",
        "selection.set",
        "history.page",
        "turn.start",
        "turn.cancel",
        "approval.answer",
    ];
    let mut sixteen: Vec<&str> = base[1..].to_vec();
    sixteen.push("tool.cards");
    let (_s, init) = start_with_result(&env, &sixteen);
    assert_eq!(init["capabilities"].as_array().unwrap().len(), 17);
    let mut seventeen = base.to_vec();
    seventeen.push("tool.cards");
    let mut s = env.spawn();
    let f = s.call(
        "init",
        "initialize",
        &json!({"required_capabilities": seventeen}),
    );
    assert_eq!(f["error"]["code"], "invalid_params");
}

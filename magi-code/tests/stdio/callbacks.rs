//! A provider that runs its own loop calls the turn's tools back mid-step, through the real
//! binary (the offline provider's `call_back` step): each call runs through the direct
//! pipeline (policy, approval, activities, records) and its answer reaches the provider before
//! its step ends; a denial reaches it as an error, `turn.cancel` cuts a call short.

use crate::common::{
    cancel_turn, events, reconciled, start_session, start_turn, until_finished, write_script, Env,
};
use serde_json::{json, Value};
use std::time::Duration;

/// A session whose one scripted turn plays `steps`, with tool policies `tools`.
fn scripted(steps: Value, tools: Value) -> (Env, crate::common::Server, String) {
    let env = Env::new();
    std::fs::write(env.cwd.join("n.txt"), "first line of the note\nsecond\n").unwrap();
    write_script(&env, json!([{ "steps": steps }]), Some(tools));
    let (s, sid) = start_session(&env, &["approval.answer"]);
    (env, s, sid)
}

#[test]
fn a_call_back_mid_step_runs_as_a_direct_call_and_its_answer_reaches_the_provider() {
    let steps = json!([
        {"text": "before "},
        {"call_back": {"name": "read_file", "input": {"path": "n.txt"}}},
        {"text": " after"},
    ]);
    let (env, mut s, sid) = scripted(steps, json!({"read": "allow"}));
    start_turn(&mut s, &sid, "read it back");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let text = reconciled(&frames);
    assert!(text.starts_with("before read_file: "), "{text}");
    assert!(
        text.contains("first line of the note") && text.ends_with(" after"),
        "{text}"
    );
    let acts: Vec<(String, String)> = events(&frames, "activity")
        .iter()
        .map(|f| {
            let d = &f["data"];
            (
                d["name"].as_str().unwrap().to_owned(),
                d["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        acts,
        [
            ("read_file".to_owned(), "started".to_owned()),
            ("read_file".to_owned(), "completed".to_owned())
        ]
    );
    // Stored as a direct call is: the text before it (a call ends a segment), its call, its
    // result, then the rest of the reply.
    let stored = crate::common::session_records(&env, &sid);
    let at = |ty: &str| stored.iter().position(|r| r["type"] == ty).unwrap();
    let last = stored
        .iter()
        .rposition(|r| r["type"] == "assistant_message")
        .unwrap();
    assert!(at("assistant_message") < at("tool_call"));
    assert!(at("tool_call") < at("tool_result") && at("tool_result") < last);
    assert_eq!(stored[at("assistant_message")]["text"], "before ");
    assert_eq!(
        stored[at("tool_call")]["call_id"],
        stored[at("tool_result")]["call_id"]
    );
    s.shutdown_ok("bye");
}

#[test]
fn a_call_back_that_asks_waits_for_the_client_and_a_denial_reaches_the_provider() {
    for allow in [true, false] {
        let steps = json!([
            {"call_back": {"name": "write_file", "input": {"path": "w.txt", "content": "x"}}},
        ]);
        let (env, mut s, sid) = scripted(steps, json!({"write": "ask"}));
        let run_id = start_turn(&mut s, &sid, "write");
        crate::common::answer_next_approval(&mut s, &sid, &run_id, allow);
        let frames = until_finished(&mut s);
        assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
        let text = reconciled(&frames);
        assert_eq!(env.cwd.join("w.txt").exists(), allow);
        if allow {
            assert!(text.starts_with("write_file: "), "{text}");
        } else {
            assert_eq!(text, "write_file failed: denied by the user");
        }
        s.shutdown_ok("bye");
    }
}

#[test]
fn turn_cancel_during_a_call_back_cuts_it_short_within_500_ms() {
    let steps = json!([
        {"call_back": {"name": "shell", "input": {"command": "sleep 27.43"}}},
        {"text": "never"},
    ]);
    let (_env, mut s, sid) = scripted(steps, json!({"shell": "allow"}));
    let run_id = start_turn(&mut s, &sid, "sleep");
    loop {
        let f = s.next();
        if f["event"] == "activity" && f["data"]["name"] == "shell" {
            break;
        }
    }
    let (frames, took) = cancel_turn(&mut s, &sid, &run_id);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "cancelled");
    assert!(took < Duration::from_millis(500), "{took:?}");
    s.shutdown_ok("bye");
}

#[test]
fn a_call_back_to_exec_runs_a_code_mode_cell_whose_calls_are_the_cells() {
    let steps = json!([
        {"call_back": {"name": "exec", "input": {"code":
            "const t = await tools.read_file({path: \"n.txt\"});\nreturn t.includes(\"note\") ? 6 * 7 : 0;"}}},
    ]);
    let env = Env::new();
    std::fs::write(env.cwd.join("n.txt"), "the note\n").unwrap();
    write_script(&env, json!([{ "steps": steps }]), None);
    let script = env.root.join("script.json");
    env.write_global_settings(&json!({"model": "script", "code_mode": {"enabled": true},
        "providers": {"scripted": {"script": script}}}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "compute");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    // The offline provider says the answer's first line.
    assert_eq!(reconciled(&frames), "exec: exec completed");
    let stored = crate::common::session_records(&env, &sid);
    let call = stored.iter().find(|r| r["type"] == "tool_call").unwrap();
    assert_eq!(call["name"], "exec");
    let res = stored.iter().find(|r| r["type"] == "tool_result").unwrap();
    assert_eq!(res["is_error"], false);
    assert!(res["output"].as_str().unwrap().ends_with("\n42"), "{res}");
    // Its code's call is the cell's, stored as such.
    let nested: Vec<&Value> = stored.iter().filter(|r| r["type"] == "code_call").collect();
    assert_eq!(nested.len(), 1, "{stored:#?}");
    assert!(stored.iter().any(|r| r["type"] == "code_result"));
    assert_eq!(nested[0]["name"], "read_file");
    assert_eq!(nested[0]["call_id"], call["call_id"]);
    s.shutdown_ok("bye");
}

//! Tool calls through the scripted provider over real pipes: policy, approvals (one winning
//! answer, deny, cancel), activity events and their history.

use crate::common::{
    history_kinds, is_event, result, start_session, until_match, write_script, Env,
};
use serde_json::{json, Value};
use std::time::Duration;

#[test]
fn an_approved_write_runs_once_and_a_second_answer_is_stale() {
    let env = Env::new();
    write_script(
        &env,
        json!([{"steps": [{"tool": {"name": "write_file", "input": {"path": "out.txt", "content": "hi"}}}, {"text": "done"}]}]),
        None,
    );
    let (mut s, sid) = start_session(&env, &[]);
    s.request(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": "write it"}),
    );
    let run_id = result(&s.response("t1"))["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (started, _) = until_match(&mut s, is_event("activity"));
    assert_eq!(started["data"]["state"], "started");
    assert_eq!(started["data"]["kind"], "tool");
    assert_eq!(started["data"]["name"], "write_file");
    let (req, _) = until_match(&mut s, is_event("approval.requested"));
    let approval_id = req["data"]["approval_id"].as_str().unwrap().to_owned();
    assert_eq!(req["data"]["expires_in_ms"], 60_000);
    assert!(req["data"]["summary"].as_str().unwrap().len() <= 1024);
    assert!(
        !env.cwd.join("out.txt").exists(),
        "nothing runs before the answer"
    );
    let wrong = s.call(
        "a0",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": "not-it", "allow": true}),
    );
    assert_eq!(wrong["error"]["code"], "stale_approval");
    s.request(
        "a1",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": approval_id, "allow": true}),
    );
    let (ack, mut seen) = until_match(&mut s, |f| f["id"] == "a1");
    assert_eq!(result(&ack), &json!({"recorded": true}));
    s.request(
        "a2",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": approval_id, "allow": false}),
    );
    let (again, more) = until_match(&mut s, |f| f["id"] == "a2");
    seen.extend(more);
    assert_eq!(
        again["error"]["code"], "stale_approval",
        "never authorize again"
    );
    // The run may finish before the second answer is read: `run.finished` can come before it.
    let fin = match seen.iter().position(|f| f["event"] == "run.finished") {
        Some(i) => seen.remove(i),
        None => {
            let (fin, more) = until_match(&mut s, is_event("run.finished"));
            seen.extend(more);
            fin
        }
    };
    let done: Vec<&Value> = seen.iter().filter(|f| f["event"] == "activity").collect();
    assert_eq!(done.last().unwrap()["data"]["state"], "completed");
    assert_eq!(
        std::fs::read_to_string(env.cwd.join("out.txt")).unwrap(),
        "hi"
    );
    assert_eq!(fin["data"]["outcome"], "completed");
    let rev = fin["data"]["revision"].as_str().unwrap().to_owned();
    let kinds = history_kinds(&mut s, "p", &sid, &rev);
    assert_eq!(kinds, ["user", "activity", "assistant"]);
}

#[test]
fn denied_and_policy_refused_calls_fail_their_activity() {
    let env = Env::new();
    write_script(
        &env,
        json!([{"steps": [
            {"tool": {"name": "write_file", "input": {"path": "no.txt", "content": "x"}}},
            {"tool": {"name": "shell", "input": {"command": "touch shell-ran"}}},
            {"tool": {"name": "read_file", "input": {"path": "missing.txt"}}},
            {"tool": {"name": "list_dir", "input": {"path": "."}}},
        ]}]),
        Some(json!({"shell": "deny"})),
    );
    let (mut s, sid) = start_session(&env, &[]);
    s.request(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": "try"}),
    );
    let run_id = result(&s.response("t1"))["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (req, _) = until_match(&mut s, is_event("approval.requested"));
    let approval_id = req["data"]["approval_id"].as_str().unwrap().to_owned();
    s.request(
        "a1",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": approval_id, "allow": false}),
    );
    let (fin, seen) = until_match(&mut s, is_event("run.finished"));
    let finals: Vec<(&str, &str)> = seen
        .iter()
        .filter(|f| f["event"] == "activity" && f["data"]["state"] != "started")
        .map(|f| {
            (
                f["data"]["name"].as_str().unwrap(),
                f["data"]["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        finals,
        [
            ("write_file", "failed"),
            ("shell", "failed"),
            ("read_file", "failed"),
            ("list_dir", "completed")
        ]
    );
    assert_eq!(
        seen.iter()
            .filter(|f| f["event"] == "approval.requested")
            .count(),
        0,
        "deny needs no approval, read is allowed"
    );
    assert!(!env.cwd.join("no.txt").exists());
    assert!(!env.cwd.join("shell-ran").exists());
    assert_eq!(fin["data"]["outcome"], "completed");
}

#[test]
fn cancelling_while_an_approval_waits_denies_it() {
    let env = Env::new();
    write_script(
        &env,
        json!([{"steps": [{"tool": {"name": "shell", "input": {"command": "touch ran"}}}]}]),
        None,
    );
    let (mut s, sid) = start_session(&env, &[]);
    s.request(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": "go"}),
    );
    let run_id = result(&s.response("t1"))["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (req, _) = until_match(&mut s, is_event("approval.requested"));
    let approval_id = req["data"]["approval_id"].as_str().unwrap().to_owned();
    s.request(
        "x",
        "turn.cancel",
        &json!({"session_id": sid, "run_id": run_id}),
    );
    let (fin, seen) = until_match(&mut s, is_event("run.finished"));
    assert!(seen.iter().any(|f| f["id"] == "x"));
    let last_activity = seen
        .iter()
        .rev()
        .find(|f| f["event"] == "activity")
        .unwrap();
    assert_eq!(last_activity["data"]["state"], "failed");
    assert_eq!(fin["data"]["outcome"], "cancelled");
    assert!(!env.cwd.join("ran").exists());
    let late = s.call(
        "a",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": approval_id, "allow": true}),
    );
    assert_eq!(late["error"]["code"], "stale_approval");
    s.call("bye", "shutdown", &json!({}));
    assert_eq!(s.exit_code_within(Duration::from_secs(10)), 0);
}

//! Turns over real pipes with the offline `scripted` provider: admission, the live event
//! stream, reconciliation, the run terminal, durability across children, cancellation.

use crate::common::{entry_kinds, init_params, result, start_session, write_script, Env, Server};
use serde_json::{json, Value};
use std::time::Duration;

/// The capabilities every turn test requires.
const CAPS: [&str; 4] = ["session.create", "turn.start", "history.page", "shutdown"];

/// Frames from the admission response up to and including `run.finished`.
fn run_frames(s: &mut Server, id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let f = s.next();
        let done = f["event"] == "run.finished";
        out.push(f);
        if done {
            break;
        }
    }
    assert_eq!(
        out[0]["id"], id,
        "the admission response precedes its events"
    );
    out
}

/// Sends a request while a run streams; returns its response and the events seen meanwhile.
fn call_amid(
    s: &mut Server,
    id: &str,
    method: &str,
    params: &Value,
    seen: &mut Vec<Value>,
) -> Value {
    s.request(id, method, params);
    loop {
        let f = s.next();
        if f["id"] == id {
            return f;
        }
        assert_eq!(f["type"], "event", "{f}");
        seen.push(f);
    }
}

fn events<'a>(frames: &'a [Value], name: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| f["event"] == name)
        .map(|f| &f["data"])
        .collect()
}

#[test]
fn echo_turn_streams_reconciles_and_persists() {
    let env = Env::new();
    let (mut s, sid) = start_session(&env, &CAPS);
    let prompt = "Reply with exactly this sentence, ünïcödé included.";
    s.request(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": prompt}),
    );
    let frames = run_frames(&mut s, "t1");
    let admission = result(&frames[0]);
    let run_id = admission["run_id"].as_str().unwrap().to_owned();
    assert_eq!(admission["accepted"], true);
    assert_eq!(
        frames[1]["event"], "input.persisted",
        "input.persisted precedes provider activity"
    );
    for f in &frames[1..] {
        assert_eq!(f["type"], "event");
        assert_eq!(f["data"]["session_id"], sid.as_str());
        assert_eq!(f["data"]["run_id"], run_id.as_str());
    }
    let persisted = events(&frames, "input.persisted")[0];
    assert_eq!(persisted["durable"], true);
    let deltas = events(&frames, "message.delta");
    assert!(deltas.len() >= 2, "several deltas");
    for (i, d) in deltas.iter().enumerate() {
        assert_eq!(d["part"], i);
        assert!(d["text"].as_str().unwrap().len() <= 4_000);
    }
    let reconcile = events(&frames, "message.reconcile");
    let text: String = reconcile
        .iter()
        .map(|r| r["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, prompt);
    assert_eq!(reconcile.last().unwrap()["last_part"], true);
    assert_eq!(reconcile.last().unwrap()["partial"], false);
    let fin = events(&frames, "run.finished")[0];
    assert_eq!(fin["outcome"], "completed");
    assert_eq!(fin["persistence"], "durable");
    assert_eq!(fin["error_code"], Value::Null);
    let revision = fin["revision"].as_str().unwrap().to_owned();
    // The terminal revision pages the new history.
    let page = s.call(
        "p",
        "history.page",
        &json!({"session_id": sid, "revision": revision}),
    );
    let kinds: Vec<(&str, &str)> = result(&page)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["text"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [("user", prompt), ("assistant", prompt)]);
    let st = s.call("st", "status", &json!({}));
    assert_eq!(result(&st)["state"], "idle");
    assert_eq!(result(&st)["run_id"], Value::Null);
    s.call("bye", "shutdown", &json!({}));
    assert_eq!(s.exit_code_within(Duration::from_secs(10)), 0);

    // Created, used and reopened in a new child: the same history.
    let mut again = env.spawn();
    again.call("init", "initialize", &init_params(&[]));
    let open = again.call("o", "session.open", &json!({"session_id": sid}));
    assert_eq!(result(&open)["durable"], true);
    let rev = result(&open)["revision"].as_str().unwrap().to_owned();
    let page = again.call(
        "p",
        "history.page",
        &json!({"session_id": sid, "revision": rev}),
    );
    assert_eq!(result(&page)["entries"].as_array().unwrap().len(), 2);
    assert_eq!(result(&page)["complete"], true);
}

#[test]
fn preflight_rejections_persist_nothing() {
    let env = Env::new();
    let (mut s, sid) = start_session(&env, &CAPS);
    let blank = s.call(
        "t0",
        "turn.start",
        &json!({"session_id": sid, "prompt": " \n\t "}),
    );
    assert_eq!(blank["error"]["code"], "invalid_params");
    let long = s.call(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": "x".repeat(16_385)}),
    );
    assert_eq!(long["error"]["code"], "invalid_params");
    let wrong = s.call(
        "t2",
        "turn.start",
        &json!({"session_id": "other", "prompt": "hi"}),
    );
    assert_eq!(wrong["error"]["code"], "stale_session");
    s.call("st", "status", &json!({}));
    assert!(!env
        .home()
        .join("sessions")
        .join(format!("{sid}.jsonl"))
        .exists());
    // The largest prompt is accepted.
    s.request(
        "t3",
        "turn.start",
        &json!({"session_id": sid, "prompt": "y".repeat(16_384)}),
    );
    let frames = run_frames(&mut s, "t3");
    assert_eq!(events(&frames, "run.finished")[0]["outcome"], "completed");
}

#[test]
fn scripted_turns_cancel_fail_and_cycle() {
    let env = Env::new();
    write_script(
        &env,
        json!([
            {"steps": [{"text": "thinking..."}, {"sleep_ms": 5000}, {"text": "never"}]},
            {"steps": [{"reasoning_summary": "planned"}, {"text": "partial"}, {"fail": "boom"}]},
        ]),
        None,
    );
    let (mut s, sid) = start_session(&env, &CAPS);
    s.request(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": "go"}),
    );
    let admission = s.response("t1");
    let run_id = result(&admission)["run_id"].as_str().unwrap().to_owned();
    assert_eq!(s.next()["event"], "input.persisted");
    // The first text is streamed before the sleep; cancel only once it was seen.
    assert_eq!(s.next()["event"], "message.delta");
    // Busy while the run is active.
    let mut rest = Vec::new();
    let busy = call_amid(
        &mut s,
        "t2",
        "turn.start",
        &json!({"session_id": sid, "prompt": "again"}),
        &mut rest,
    );
    assert_eq!(busy["error"]["code"], "busy");
    let stale = call_amid(
        &mut s,
        "x0",
        "turn.cancel",
        &json!({"session_id": sid, "run_id": "not-the-run"}),
        &mut rest,
    );
    assert_eq!(stale["error"]["code"], "stale_run");
    s.request(
        "x1",
        "turn.cancel",
        &json!({"session_id": sid, "run_id": run_id}),
    );
    loop {
        let f = s.next();
        let done = f["event"] == "run.finished";
        rest.push(f);
        if done {
            break;
        }
    }
    let ack = rest.iter().find(|f| f["id"] == "x1").unwrap();
    assert_eq!(result(ack)["cancellation_requested"], true);
    let fin = events(&rest, "run.finished")[0];
    assert_eq!(fin["outcome"], "cancelled");
    assert_eq!(fin["persistence"], "durable");
    let rec = events(&rest, "message.reconcile");
    assert_eq!(
        rec.last().unwrap()["partial"],
        true,
        "a cancelled reply is kept, partial"
    );
    assert!(!rest.iter().any(|f| f["data"]["text"] == "never"));

    // Turn index 1: a reasoning summary, partial text, then the provider fails.
    s.request(
        "t3",
        "turn.start",
        &json!({"session_id": sid, "prompt": "next"}),
    );
    let frames = run_frames(&mut s, "t3");
    let fin = events(&frames, "run.finished")[0];
    assert_eq!(
        (fin["outcome"].as_str(), fin["error_code"].as_str()),
        (Some("failed"), Some("execution_failed"))
    );
    let revision = fin["revision"].as_str().unwrap().to_owned();
    let page = s.call(
        "p",
        "history.page",
        &json!({"session_id": sid, "revision": revision}),
    );
    let kinds = entry_kinds(result(&page)["entries"].as_array().unwrap());
    // Each stored failure or cancellation is followed by its derived diagnostic (runner.md 5).
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "diagnostic",
            "user",
            "reasoning_summary",
            "assistant",
            "diagnostic"
        ]
    );
    assert_eq!(
        result(&page)["complete"],
        true,
        "recorded failed/cancelled turns can be complete"
    );
    s.call("bye", "shutdown", &json!({}));
    assert_eq!(s.exit_code_within(Duration::from_secs(10)), 0);
}

#[test]
fn a_failed_run_reopens_with_a_diagnostic_after_its_partial_reply() {
    let env = Env::new();
    write_script(
        &env,
        json!([{"steps": [{"text": "half an answ"}, {"fail": "x"}]}]),
        None,
    );
    let (mut s, sid) = start_session(&env, &CAPS);
    s.request(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": "go"}),
    );
    let frames = run_frames(&mut s, "t1");
    let fin = events(&frames, "run.finished")[0];
    assert_eq!(fin["error_code"], "execution_failed");
    assert_eq!(fin["persistence"], "durable");
    s.call("bye", "shutdown", &json!({}));
    assert_eq!(s.exit_code_within(Duration::from_secs(10)), 0);

    let mut again = env.spawn();
    again.call("init", "initialize", &init_params(&[]));
    let open = again.call("o", "session.open", &json!({"session_id": sid}));
    let rev = result(&open)["revision"].as_str().unwrap().to_owned();
    let page = again.call(
        "p",
        "history.page",
        &json!({"session_id": sid, "revision": rev}),
    );
    let got: Vec<(&str, &str, bool)> = result(&page)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["text"].as_str().unwrap(),
                e["partial"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("user", "go", false),
            ("assistant", "half an answ", true),
            ("diagnostic", "The turn failed: execution_failed.", false),
        ]
    );
    assert_eq!(result(&page)["complete"], true);
    again.call("bye", "shutdown", &json!({}));
    assert_eq!(again.exit_code_within(Duration::from_secs(10)), 0);
}

#[test]
fn shutdown_during_a_run_delivers_its_terminal_first() {
    let env = Env::new();
    write_script(&env, json!([{"steps": [{"sleep_ms": 10000}]}]), None);
    let (mut s, sid) = start_session(&env, &CAPS);
    s.request(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": "wait"}),
    );
    s.response("t1");
    assert_eq!(s.next()["event"], "input.persisted");
    s.request("bye", "shutdown", &json!({}));
    let rest = s.frames_until_eof();
    assert_eq!(rest[0]["id"], "bye");
    let fin = events(&rest, "run.finished");
    assert_eq!(fin.len(), 1);
    assert_eq!(fin[0]["outcome"], "cancelled");
    assert_eq!(s.exit_code_within(Duration::from_secs(10)), 0);
}

#[test]
fn a_failed_input_append_fails_the_run_before_any_acknowledgement() {
    let env = Env::new();
    let (mut s, sid) = start_session(&env, &CAPS);
    // The sessions folder becomes a symlink: histories are never written through one.
    let sessions = env.home().join("sessions");
    std::fs::remove_dir(&sessions).unwrap();
    let elsewhere = env.root.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &sessions).unwrap();
    s.request(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": "hello"}),
    );
    let frames = run_frames(&mut s, "t1");
    assert!(events(&frames, "input.persisted").is_empty());
    let fin = events(&frames, "run.finished")[0];
    assert_eq!(fin["outcome"], "failed");
    assert_eq!(fin["persistence"], "not_started");
    assert_eq!(fin["revision"], Value::Null);
    assert_eq!(fin["error_code"], "persistence_failed");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

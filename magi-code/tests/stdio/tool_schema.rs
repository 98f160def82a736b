//! Every call's input is checked against its tool's JSON Schema before its policy and approval
//! (`runner.md` 2): under `ask`, a built-in, MCP or client tool call whose input breaks the
//! schema gets an `invalid input: …` error result naming what is wrong (from the schema, never
//! the input's values), with no approval request, no `pre_tool` hook and no client call; a
//! valid call to the same tool still asks.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm};
use crate::common::{events, last_tool_result, result, start_session, start_turn, Env, Server};
use crate::mcp::{fake, mcp_settings};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// Frames of the run up to `run.finished`, answering every approval with `allow` and every
/// `client.tool.call` with `ok: true`.
fn drive(s: &mut Server, sid: &str, run_id: &str) -> Vec<Value> {
    let mut frames = Vec::new();
    let mut n = 0;
    loop {
        let f = s.next();
        n += 1;
        let id = format!("x{n}");
        if f["event"] == "approval.requested" {
            let approval_id = f["data"]["approval_id"].clone();
            s.request(
                &id,
                "approval.answer",
                &json!({"session_id": sid, "run_id": run_id, "approval_id": approval_id, "allow": true}),
            );
        } else if f["event"] == "client.tool.call" {
            let call_id = f["data"]["call_id"].clone();
            s.request(
                &id,
                "client.tool.result",
                &json!({"session_id": sid, "run_id": run_id, "call_id": call_id, "ok": true, "output": "opened"}),
            );
        }
        let done = f["event"] == "run.finished";
        frames.push(f);
        if done {
            return frames;
        }
    }
}

/// Asserts the run asked exactly one approval, with `summary`, after the first call had
/// already failed, and completed.
#[track_caller]
fn one_approval_after_the_refusal(frames: &[Value], summary: &str) {
    let approvals = events(frames, "approval.requested");
    assert_eq!(approvals.len(), 1, "{approvals:#?}");
    assert_eq!(approvals[0]["data"]["summary"], summary);
    let at = |pred: &dyn Fn(&Value) -> bool| frames.iter().position(pred).unwrap();
    let refused = at(&|f| f["event"] == "activity" && f["data"]["state"] == "failed");
    let asked = at(&|f| f["event"] == "approval.requested");
    assert!(refused < asked, "the bad call never reached approval");
    let acts = events(frames, "activity");
    assert!(
        acts[1]["data"]["summary"]
            .as_str()
            .unwrap()
            .contains(": invalid input: "),
        "{:#?}",
        acts[1]
    );
    assert_eq!(acts.last().unwrap()["data"]["state"], "completed");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
}

#[test]
fn a_built_in_call_breaking_its_schema_is_refused_before_approval_and_hooks() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("c1", "write_file", r#"{"path":"a.txt"}"#),
        chat_tool_call("c2", "write_file", r#"{"path":"b.txt","content":"hi"}"#),
        chat_text(&["done"]),
    ]);
    let env = Env::new();
    let log = env.root.join("hook.log");
    env.use_fake_llm(
        &llm,
        &json!({
            "tools": {"write": "ask"},
            "hooks": {"pre_tool": [{"command": format!("echo ran >> '{}'", log.display())}]},
        }),
    );
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "write");
    let frames = drive(&mut s, &sid, &run_id);
    one_approval_after_the_refusal(&frames, "write_file b.txt (2 bytes)");
    let _ = llm.next(WAIT);
    assert_eq!(
        last_tool_result(&llm.next(WAIT).body),
        (
            "c1".to_owned(),
            "invalid input: the input: missing required property `content`".to_owned()
        )
    );
    assert!(!env.cwd.join("a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.cwd.join("b.txt")).unwrap(),
        "hi"
    );
    let hooked = std::fs::read_to_string(&log).unwrap();
    assert_eq!(hooked, "ran\n", "the hook ran for the valid call only");
    s.shutdown_ok("bye");
}

#[test]
fn an_mcp_call_breaking_its_schema_is_refused_before_approval() {
    let secret = "sk-ant-api03-SECRETSECRET0123456789";
    let llm = FakeLlm::start(vec![
        chat_tool_call(
            "c1",
            "mcp__fake__echo",
            &json!({"text": {"k": secret}}).to_string(),
        ),
        chat_tool_call("c2", "mcp__fake__echo", r#"{"text":"hi"}"#),
        chat_text(&["done"]),
    ]);
    let env = Env::new();
    let def = fake("ok");
    env.use_fake_llm(&llm, &json!({"mcp": mcp_settings(&[("fake", &def)], true)}));
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "echo");
    let frames = drive(&mut s, &sid, &run_id);
    one_approval_after_the_refusal(&frames, "mcp__fake__echo (text)");
    assert!(!serde_json::to_string(&frames).unwrap().contains("SECRET"));
    let _ = llm.next(WAIT);
    let (id, refused) = last_tool_result(&llm.next(WAIT).body);
    assert_eq!(
        (id.as_str(), refused.as_str()),
        ("c1", "invalid input: text: expected string, got object")
    );
    let (id, echoed) = last_tool_result(&llm.next(WAIT).body);
    assert_eq!(id, "c2");
    assert!(echoed.contains("hi"), "{echoed}");
    s.shutdown_ok("bye");
}

#[test]
fn a_client_tool_call_breaking_its_schema_is_refused_before_approval_and_the_client() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("c1", "open_tab", r#"{"url":7}"#),
        chat_tool_call("c2", "open_tab", r#"{"url":"https://example.com"}"#),
        chat_text(&["done"]),
    ]);
    let env = Env::new();
    env.use_fake_llm(&llm, &json!({"tools": {"client": "ask"}}));
    let mut s = env.spawn();
    let tool = json!({
        "name": "open_tab",
        "description": "Opens a tab.",
        "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
    });
    let init = s.call(
        "init",
        "initialize",
        &json!({"required_capabilities": ["client.tools"], "client_tools": [tool]}),
    );
    assert!(init.get("result").is_some(), "{init}");
    let sid = result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let run_id = start_turn(&mut s, &sid, "open");
    let frames = drive(&mut s, &sid, &run_id);
    one_approval_after_the_refusal(&frames, "open_tab");
    let calls = events(&frames, "client.tool.call");
    assert_eq!(calls.len(), 1, "only the valid call reaches the client");
    assert_eq!(
        calls[0]["data"]["input"],
        json!({"url": "https://example.com"})
    );
    let _ = llm.next(WAIT);
    assert_eq!(
        last_tool_result(&llm.next(WAIT).body),
        (
            "c1".to_owned(),
            "invalid input: url: expected string, got number".to_owned()
        )
    );
    assert_eq!(last_tool_result(&llm.next(WAIT).body).1, "opened");
    s.shutdown_ok("bye");
}

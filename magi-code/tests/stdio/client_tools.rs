//! The `client.tools` extension over real pipes: registration at `initialize`, the tools
//! offered to the model, `client.tool.call`, one winning `client.tool.result`, failures, the
//! `client` policy, and `client.tool.cancel` on `turn.cancel`.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm};
use crate::common::{
    fake_llm_env, is_event, result, start_turn, until_match, write_script, Env, Server,
};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;

pub(crate) fn open_tab() -> Value {
    json!({
        "name": "open_tab",
        "description": "Opens a browser tab in the client.",
        "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
    })
}

/// Spawns a child in `env`, initializes it with `client.tools` and [`open_tab`], creates a
/// session; returns the child, the `initialize` result and the session ID.
pub(crate) fn start_with_tools(env: &Env) -> (Server, Value, String) {
    let mut s = env.spawn();
    let init = s.call(
        "init",
        "initialize",
        &json!({"required_capabilities": ["client.tools"], "client_tools": [open_tab()]}),
    );
    let init = result(&init).clone();
    let sid = result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (s, init, sid)
}

pub(crate) fn answer(sid: &str, run_id: &str, call_id: &str, ok: bool, output: &str) -> Value {
    json!({"session_id": sid, "run_id": run_id, "call_id": call_id, "ok": ok, "output": output})
}

fn is_uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok_and(|u| u.hyphenated().to_string() == s)
}

#[test]
fn initialize_registers_the_tools_and_base_clients_see_base_shapes() {
    let env = Env::new();
    let (mut s, init, _) = start_with_tools(&env);
    assert_eq!(init["capabilities"].as_array().unwrap().len(), 17);
    assert_eq!(init["capabilities"][16], "client.tools");
    assert_eq!(
        init["extensions"],
        json!({"client.tools": {"version": 1, "tools": ["open_tab"]}})
    );
    assert_eq!(init["limits"]["client_tool_timeout_ms"], 120_000);
    assert_eq!(init["limits"]["client_tools"], 32);
    s.shutdown_ok("bye");

    let mut base = env.spawn();
    // client_tools without the capability: refused before any effect, then a corrected
    // initialize is admitted.
    let refused = base.call(
        "i0",
        "initialize",
        &json!({"required_capabilities": [], "client_tools": [open_tab()]}),
    );
    assert_eq!(refused["error"]["code"], "invalid_params");
    let r = base.call("i1", "initialize", &json!({"required_capabilities": []}));
    let r = result(&r);
    assert!(r.get("extensions").is_none(), "{r}");
    assert_eq!(r["capabilities"].as_array().unwrap().len(), 16);
    assert!(r["limits"].get("client_tools").is_none());
    let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["capabilities", "limits", "status"]);
    base.shutdown_ok("bye");
}

#[test]
fn the_client_answers_the_call_and_the_model_gets_its_output() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("call_A", "open_tab", r#"{"url":"https://example.com"}"#),
        chat_text(&["Opened."]),
    ]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, _, sid) = start_with_tools(&env);
    let run_id = start_turn(&mut s, &sid, "open it");
    let (call, seen) = until_match(&mut s, is_event("client.tool.call"));
    let started = seen.iter().find(|f| f["event"] == "activity").unwrap();
    assert_eq!(started["data"]["name"], "open_tab");
    assert_eq!(started["data"]["state"], "started");
    assert!(
        !seen.iter().any(|f| f["event"] == "approval.requested"),
        "the client policy defaults to allow"
    );
    let d = &call["data"];
    let keys: Vec<&String> = d.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 5, "{d}");
    assert_eq!(d["session_id"], sid.as_str());
    assert_eq!(d["run_id"], run_id.as_str());
    assert_eq!(d["name"], "open_tab");
    assert_eq!(d["input"], json!({"url": "https://example.com"}));
    let call_id = d["call_id"].as_str().unwrap().to_owned();
    assert!(is_uuid(&call_id), "{call_id}");

    // Refusals that leave the call pending.
    let wrong = s.call(
        "w",
        "client.tool.result",
        &answer(&sid, &run_id, "not-the-call", true, "x"),
    );
    assert_eq!(wrong["error"]["code"], "stale_call");
    let other_run = s.call(
        "o",
        "client.tool.result",
        &answer(&sid, "other-run", &call_id, true, "x"),
    );
    assert_eq!(other_run["error"]["code"], "stale_call");
    let big = "x".repeat(49_153);
    let over = s.call(
        "b",
        "client.tool.result",
        &answer(&sid, &run_id, &call_id, true, &big),
    );
    assert_eq!(over["error"]["code"], "invalid_params");
    let stale = s.call(
        "s",
        "client.tool.result",
        &answer("other-session", &run_id, &call_id, true, "x"),
    );
    assert_eq!(stale["error"]["code"], "stale_session");

    s.request(
        "a1",
        "client.tool.result",
        &answer(&sid, &run_id, &call_id, true, "tab 3 opened"),
    );
    let (ack, mut seen) = until_match(&mut s, |f| f["id"] == "a1");
    assert_eq!(result(&ack), &json!({"recorded": true}));
    s.request(
        "a2",
        "client.tool.result",
        &answer(&sid, &run_id, &call_id, false, "again"),
    );
    let (again, more) = until_match(&mut s, |f| f["id"] == "a2");
    seen.extend(more);
    assert_eq!(again["error"]["code"], "stale_call", "one answer wins");
    let (fin, more) = until_match(&mut s, is_event("run.finished"));
    seen.extend(more);
    assert_eq!(fin["data"]["outcome"], "completed");
    let done = seen
        .iter()
        .rev()
        .find(|f| f["event"] == "activity")
        .unwrap();
    assert_eq!(done["data"]["state"], "completed");
    assert_eq!(done["data"]["name"], "open_tab");
    assert!(!seen.iter().any(|f| f["event"] == "client.tool.cancel"));

    let first = llm.next(WAIT);
    let offered: Vec<&Value> = first.body["tools"].as_array().unwrap().iter().collect();
    let ours = offered
        .iter()
        .find(|t| t["function"]["name"] == "open_tab")
        .expect("the client tool is offered beside the built-ins");
    assert_eq!(
        ours["function"]["description"],
        "Opens a browser tab in the client."
    );
    assert_eq!(ours["function"]["parameters"], open_tab()["input_schema"]);
    assert!(offered.iter().any(|t| t["function"]["name"] == "shell"));
    let second = llm.next(WAIT);
    let last = second.body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["tool_call_id"], "call_A");
    assert_eq!(last["content"], "tab 3 opened");
    s.shutdown_ok("bye");
}

fn scripted(tools: Option<Value>) -> Env {
    let env = Env::new();
    write_script(
        &env,
        json!([{"steps": [{"tool": {"name": "open_tab", "input": {"url": "u"}}}, {"text": "done"}]}]),
        tools,
    );
    env
}

#[test]
fn a_failed_client_tool_fails_its_activity() {
    let env = scripted(None);
    let (mut s, _, sid) = start_with_tools(&env);
    let run_id = start_turn(&mut s, &sid, "open it");
    let (call, _) = until_match(&mut s, is_event("client.tool.call"));
    let call_id = call["data"]["call_id"].as_str().unwrap().to_owned();
    s.request(
        "a",
        "client.tool.result",
        &answer(&sid, &run_id, &call_id, false, "no browser"),
    );
    let (fin, seen) = until_match(&mut s, is_event("run.finished"));
    assert!(seen
        .iter()
        .any(|f| f["id"] == "a" && f["result"]["recorded"] == true));
    let done = seen
        .iter()
        .rev()
        .find(|f| f["event"] == "activity")
        .unwrap();
    assert_eq!(done["data"]["state"], "failed");
    assert_eq!(done["data"]["name"], "open_tab");
    assert_eq!(fin["data"]["outcome"], "completed", "the run goes on");
    s.shutdown_ok("bye");
}

#[test]
fn turn_cancel_while_waiting_sends_client_tool_cancel() {
    let env = scripted(None);
    let (mut s, _, sid) = start_with_tools(&env);
    let run_id = start_turn(&mut s, &sid, "open it");
    let (call, _) = until_match(&mut s, is_event("client.tool.call"));
    let call_id = call["data"]["call_id"].as_str().unwrap().to_owned();
    s.request(
        "x",
        "turn.cancel",
        &json!({"session_id": sid, "run_id": run_id}),
    );
    let (cancel, _) = until_match(&mut s, is_event("client.tool.cancel"));
    assert_eq!(
        cancel["data"],
        json!({"session_id": sid, "run_id": run_id, "call_id": call_id})
    );
    let (fin, seen) = until_match(&mut s, is_event("run.finished"));
    let done = seen
        .iter()
        .rev()
        .find(|f| f["event"] == "activity")
        .unwrap();
    assert_eq!(done["data"]["state"], "failed");
    assert_eq!(fin["data"]["outcome"], "cancelled");
    let late = s.call(
        "late",
        "client.tool.result",
        &answer(&sid, &run_id, &call_id, true, "x"),
    );
    assert_eq!(late["error"]["code"], "stale_call");
    s.shutdown_ok("bye");
}

#[test]
fn the_client_policy_can_deny_and_then_nothing_is_asked() {
    let env = scripted(Some(json!({"client": "deny"})));
    let (mut s, _, sid) = start_with_tools(&env);
    start_turn(&mut s, &sid, "open it");
    let (fin, seen) = until_match(&mut s, is_event("run.finished"));
    assert!(!seen.iter().any(|f| f["event"] == "client.tool.call"));
    let done = seen
        .iter()
        .rev()
        .find(|f| f["event"] == "activity")
        .unwrap();
    assert_eq!(done["data"]["state"], "failed");
    assert_eq!(fin["data"]["outcome"], "completed");
    s.shutdown_ok("bye");
}

#[test]
fn the_input_bound_at_its_edge() {
    // `{"url":"…"}` is 10 bytes around the padding.
    let at = "x".repeat(49_152 - 10);
    let over = "x".repeat(49_153 - 10);
    let env = Env::new();
    write_script(
        &env,
        json!([{"steps": [
            {"tool": {"name": "open_tab", "input": {"url": at}}},
            {"tool": {"name": "open_tab", "input": {"url": over}}},
            {"text": "done"},
        ]}]),
        None,
    );
    let (mut s, _, sid) = start_with_tools(&env);
    let run_id = start_turn(&mut s, &sid, "open it");
    let (call, _) = until_match(&mut s, is_event("client.tool.call"));
    assert_eq!(
        serde_json::to_vec(&call["data"]["input"]).unwrap().len(),
        49_152
    );
    let call_id = call["data"]["call_id"].as_str().unwrap().to_owned();
    s.request(
        "a",
        "client.tool.result",
        &answer(&sid, &run_id, &call_id, true, "ok"),
    );
    let (fin, seen) = until_match(&mut s, is_event("run.finished"));
    assert!(
        !seen.iter().any(|f| f["event"] == "client.tool.call"),
        "an input over the bound fails without an event"
    );
    let done = seen
        .iter()
        .rev()
        .find(|f| f["event"] == "activity")
        .unwrap();
    assert_eq!(done["data"]["state"], "failed");
    assert_eq!(fin["data"]["outcome"], "completed");
    s.shutdown_ok("bye");
}

#[test]
fn with_tool_cards_too_a_client_call_gets_a_client_card_and_both_descriptors() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("call_C", "open_tab", r#"{"url":"https://example.com"}"#),
        chat_text(&["Opened."]),
    ]);
    let env = fake_llm_env(&llm, &json!({}));
    let mut s = env.spawn();
    let init = s.call(
        "init",
        "initialize",
        &json!({"required_capabilities": ["client.tools", "tool.cards"], "client_tools": [open_tab()]}),
    );
    let ext = &result(&init)["extensions"];
    assert_eq!(ext["client.tools"]["tools"], json!(["open_tab"]));
    assert_eq!(ext["tool.cards"]["card_bytes"], 4096);
    let sid = result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let run_id = start_turn(&mut s, &sid, "open it");
    let (call, seen) = until_match(&mut s, is_event("client.tool.call"));
    let card = seen
        .iter()
        .find(|f| f["event"] == "tool.card")
        .expect("a running card before the call");
    assert_eq!(card["data"]["card"]["kind"], "client");
    assert_eq!(card["data"]["card"]["name"], "open_tab");
    assert_eq!(card["data"]["card"]["status"], "running");
    let answer = s.call(
        "r",
        "client.tool.result",
        &json!({"session_id": sid, "run_id": run_id, "call_id": call["data"]["call_id"], "ok": true, "output": "done"}),
    );
    assert_eq!(result(&answer)["recorded"], true);
    let (fin, seen) = until_match(&mut s, is_event("run.finished"));
    assert_eq!(fin["data"]["outcome"], "completed");
    let done = seen
        .iter()
        .find(|f| f["event"] == "tool.card")
        .expect("a final card");
    assert_eq!(done["data"]["card"]["status"], "completed");
    assert_eq!(done["data"]["card"]["kind"], "client");
}

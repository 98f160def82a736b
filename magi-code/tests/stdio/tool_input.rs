//! Tool input that does not parse, on every wire (`runner.md` 2): the same truncated
//! `edit_file` arguments through Chat Completions, Anthropic Messages and Responses give the
//! model an "invalid input" error result and the turn goes on; the run never fails for it.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm, Reply};
use crate::common::responses_sse::{completed, ev, text as responses_text};
use crate::common::{anthropic_sse as a, events, fake_llm_settings, run_turn, start_session, Env};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;
/// `edit_file` arguments cut off mid-string, as a model that ran out of output sends them.
const TRUNCATED: &str = r#"{"path":"a.txt","old_string":"alpha","new_str"#;

/// Runs one turn whose first step calls `edit_file` with [`TRUNCATED`] input; returns the
/// frames and the second request's body (the one carrying the result).
fn turn(env: &Env, llm: &FakeLlm) -> (Vec<Value>, Value) {
    std::fs::write(env.cwd.join("a.txt"), "alpha\n").unwrap();
    let (mut s, sid) = start_session(env, &[]);
    let frames = run_turn(&mut s, &sid, "edit a.txt");
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "completed", "{frames:#?}");
    let diagnostics: Vec<&Value> = events(&frames, "diagnostic");
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    let failed: Vec<&Value> = events(&frames, "activity")
        .into_iter()
        .filter(|f| f["data"]["state"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{frames:#?}");
    let _ = llm.next(WAIT);
    let second = llm.next(WAIT).body;
    assert_eq!(
        std::fs::read_to_string(env.cwd.join("a.txt")).unwrap(),
        "alpha\n",
        "the call did not run"
    );
    (frames, second)
}

#[test]
fn chat_answers_unparsable_tool_input_with_an_error_result() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("c1", "edit_file", TRUNCATED),
        chat_text(&["sorry"]),
    ]);
    let env = Env::new();
    env.use_fake_llm(&llm, &json!({"tools": {"write": "allow"}}));
    let (_, second) = turn(&env, &llm);
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["tool_call_id"], "c1");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .starts_with("invalid input"),
        "{last}"
    );
}

#[test]
fn anthropic_answers_unparsable_tool_input_with_an_error_result() {
    let llm = FakeLlm::start(vec![
        a::reply(vec![
            a::tool_use(0, "toolu_A", "edit_file", TRUNCATED),
            a::stop("tool_use"),
        ]),
        a::reply(vec![a::text(0, "sorry"), a::stop("end_turn")]),
    ]);
    let mut env = Env::new();
    env.set_var("ANTHROPIC_API_KEY", "sk-ant-test-key-123");
    env.write_global_settings(&json!({
        "provider": "anthropic", "model": "claude-sonnet-4-5",
        "providers": {"anthropic": {"base_url": llm.base}},
        "tools": {"write": "allow"},
    }));
    let (_, second) = turn(&env, &llm);
    let msgs = second["messages"].as_array().unwrap();
    let call = &msgs[msgs.len() - 2]["content"][0];
    assert_eq!(call["type"], "tool_use");
    assert!(
        call["input"].is_object(),
        "the API takes only an object: {call}"
    );
    let result = &msgs.last().unwrap()["content"][0];
    assert_eq!(result["type"], "tool_result", "{result}");
    assert_eq!(result["tool_use_id"], "toolu_A");
    assert_eq!(result["is_error"], true);
    let content = result["content"].to_string();
    assert!(content.contains("invalid input"), "{content}");
}

#[test]
fn responses_answers_unparsable_tool_input_with_an_error_result() {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "edit_file", "arguments": TRUNCATED, "status": "completed"});
    let llm = FakeLlm::start(vec![
        Reply::sse(vec![
            ev(
                &json!({"type": "response.output_item.added", "sequence_number": 0, "output_index": 0, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "edit_file", "arguments": ""}}),
            ),
            ev(
                &json!({"type": "response.output_item.done", "sequence_number": 1, "output_index": 0, "item": call}),
            ),
            completed(2),
        ]),
        responses_text("sorry"),
    ]);
    let env = Env::new();
    env.write_global_settings(&fake_llm_settings(
        &llm,
        &json!({"providers": {"local": {"wire_api": "responses"}}, "tools": {"write": "allow"}}),
    ));
    let (_, second) = turn(&env, &llm);
    let input = second["input"].as_array().unwrap();
    let out = input.last().unwrap();
    assert_eq!(out["type"], "function_call_output", "{out}");
    assert_eq!(out["call_id"], "call_1");
    assert!(
        out["output"].as_str().unwrap().starts_with("invalid input"),
        "{out}"
    );
}

//! The agent loop against a fake Anthropic Messages server, replaying the documented stream
//! shapes (`provider-streams.md` 1): a `tool_use` whose input arrives in `input_json_delta`
//! fragments, a signed `thinking` block passed back verbatim, `tool_result` blocks with
//! `is_error`, parallel calls answered in one user message, and an `overloaded_error` after a
//! 200.

use crate::common::anthropic_sse::{ev, reply, start, stop, text, thinking, tool_use};
use crate::common::fake_llm::{FakeLlm, Reply};
use crate::common::{result, run_turn, start_session, Env};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;

fn env_for(llm: &FakeLlm) -> Env {
    let mut env = Env::new();
    env.set_var("ANTHROPIC_API_KEY", "sk-ant-test-key-123");
    env.write_global_settings(&json!({
        "provider": "anthropic", "model": "claude-sonnet-4-5",
        "providers": {"anthropic": {"base_url": llm.base}},
        "tools": {"read": "allow", "write": "deny"},
    }));
    env
}

#[test]
fn tool_use_thinking_and_results_go_back_in_the_documented_shape() {
    let llm = FakeLlm::start(vec![
        reply(vec![
            thinking(0, "I should read both files.", "EqQBsig=="),
            text(1, "Reading."),
            tool_use(2, "toolu_A", "read_file", r#"{"path":"a.txt"}"#),
            tool_use(
                3,
                "toolu_B",
                "write_file",
                r#"{"path":"b.txt","content":"x"}"#,
            ),
            stop("tool_use"),
        ]),
        reply(vec![text(0, "Done: a says alpha."), stop("end_turn")]),
    ]);
    let env = env_for(&llm);
    std::fs::write(env.cwd.join("a.txt"), "alpha\n").unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "read a, write b");
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "completed", "{frames:#?}");

    let first = llm.next(WAIT);
    assert_eq!(first.path, "/v1/messages");
    // One system block, the first cache breakpoint (`runner.md` 1 "Prompt caching").
    assert!(first.body["system"][0]["text"]
        .as_str()
        .unwrap()
        .contains("magi-code"));
    assert_eq!(
        first.body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(first.body["stream"], true);
    assert!(first.body["max_tokens"].as_u64().unwrap() > 0);
    let tool = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_file")
        .unwrap()
        .clone();
    assert_eq!(tool["input_schema"]["type"], "object");

    let second = llm.next(WAIT);
    let msgs = second.body["messages"].as_array().unwrap();
    let n = msgs.len();
    let assistant = &msgs[n - 2];
    assert_eq!(assistant["role"], "assistant");
    let blocks = assistant["content"].as_array().unwrap();
    assert_eq!(
        blocks[0],
        json!({"type": "thinking", "thinking": "I should read both files.", "signature": "EqQBsig=="}),
        "the signed thinking block goes back verbatim, first"
    );
    assert_eq!(blocks[1]["type"], "text");
    assert_eq!(blocks[2]["type"], "tool_use");
    assert_eq!(blocks[2]["id"], "toolu_A");
    assert_eq!(blocks[2]["input"], json!({"path": "a.txt"}));
    assert_eq!(blocks[3]["id"], "toolu_B");
    let user = &msgs[n - 1];
    assert_eq!(user["role"], "user");
    let results = user["content"].as_array().unwrap();
    assert_eq!(results.len(), 2, "both results in one user message");
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_A");
    assert_eq!(results[0]["is_error"], false);
    assert!(results[0]["content"].as_str().unwrap().contains("alpha"));
    assert_eq!(results[1]["tool_use_id"], "toolu_B");
    assert_eq!(
        results[1]["is_error"], true,
        "policy deny is an error result"
    );
    assert!(!env.cwd.join("b.txt").exists());

    // The thinking text is a provider summary: it shows in history; the signature never does.
    let rev = fin["revision"].as_str().unwrap();
    let page = s.call(
        "p",
        "history.page",
        &json!({"session_id": sid, "revision": rev}),
    );
    let entries = result(&page)["entries"].as_array().unwrap().clone();
    assert!(entries
        .iter()
        .any(|e| e["kind"] == "reasoning_summary" && e["text"] == "I should read both files."));
    assert!(!page.to_string().contains("EqQBsig=="));

    // What replay needs is stored: the calls, their results, the signed block, the usage.
    let file = crate::common::sessions_dir(&env).join(format!("{sid}.jsonl"));
    let types: Vec<String> = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    for t in [
        "tool_call",
        "tool_result",
        "provider_item",
        "usage",
        "reasoning_summary",
    ] {
        assert!(types.iter().any(|x| x == t), "{t} in {types:?}");
    }
}

#[test]
fn an_overloaded_error_after_200_fails_the_step_with_the_partial_reply() {
    let mut chunks = vec![start()];
    chunks.extend(vec![
        ev(&json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
        ev(&json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half a"}})),
        ev(&json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
    ]);
    let llm = FakeLlm::start(vec![Reply::sse(chunks)]);
    let env = env_for(&llm);
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "hi");
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "failed");
    assert_eq!(fin["error_code"], "execution_failed");
    let diags: Vec<&Value> = frames
        .iter()
        .filter(|f| f["event"] == "diagnostic")
        .collect();
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0]["data"]["code"], "provider_error");
    let rec: Vec<&Value> = frames
        .iter()
        .filter(|f| f["event"] == "message.reconcile")
        .collect();
    assert_eq!(rec.last().unwrap()["data"]["text"], "Half a");
    assert_eq!(rec.last().unwrap()["data"]["partial"], true);
}

#[test]
fn a_529_is_retried_and_a_second_turn_replays_the_first() {
    let llm = FakeLlm::start(vec![
        Reply::status(
            529,
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
        // Retried without a wait: the backoff is `providers::http::tests`, on virtual time.
        .header("retry-after", "0"),
        reply(vec![text(0, "First answer."), stop("end_turn")]),
        reply(vec![text(0, "Second answer."), stop("end_turn")]),
    ]);
    let env = env_for(&llm);
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "one");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert!(frames
        .iter()
        .any(|f| f["event"] == "diagnostic" && f["data"]["code"] == "provider_retry"));
    let frames = run_turn(&mut s, &sid, "two");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let (_, _, third) = (llm.next(WAIT), llm.next(WAIT), llm.next(WAIT));
    let msgs = third.body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(msgs[1]["content"][0]["text"], "First answer.");
}

#[test]
fn effort_travels_as_adaptive_thinking_or_a_budget_as_the_catalog_says() {
    for (model, thinking) in [("claude-new", "adaptive"), ("claude-old", "budget")] {
        let llm = FakeLlm::start(vec![reply(vec![text(0, "ok"), stop("end_turn")])]);
        let mut env = Env::new();
        env.set_var("ANTHROPIC_API_KEY", "dummy");
        env.write_global_settings(&json!({
            "provider": "anthropic", "model": model,
            "providers": {
                "catalog": {"enabled": [format!("anthropic/{model}")]},
                "anthropic": {"base_url": llm.base, "max_output_tokens": 1000},
            },
        }));
        crate::common::write_catalog_cache(
            &env,
            "anthropic",
            json!([{"id": model, "efforts": ["low", "high"], "thinking": thinking}]),
        );
        let (mut s, sid) = start_session(&env, &[]);
        let sel = result(&s.call("st", "status", &json!({})))["selection"]["revision"]
            .as_str()
            .unwrap()
            .to_owned();
        let cat = result(&s.call("cat", "model.catalog", &json!({})))["revision"]
            .as_str()
            .unwrap()
            .to_owned();
        let set = s.call(
            "set",
            "selection.set",
            &json!({"session_id": sid, "selection_revision": sel, "catalog_revision": cat, "provider": "anthropic", "model": model, "effort": {"mode": "set", "value": "high"}}),
        );
        assert_eq!(result(&set)["durable"], true, "{set}");
        let frames = run_turn(&mut s, &sid, "think");
        assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
        let req = llm.next(WAIT);
        if thinking == "adaptive" {
            assert_eq!(
                req.body["thinking"],
                json!({"type": "adaptive", "display": "summarized"})
            );
            assert_eq!(req.body["output_config"], json!({"effort": "high"}));
            assert_eq!(req.body["max_tokens"], 1000);
        } else {
            assert_eq!(
                req.body["thinking"],
                json!({"type": "enabled", "budget_tokens": 24576})
            );
            assert!(req.body.get("output_config").is_none());
            assert_eq!(req.body["max_tokens"], 24576 + 1000);
        }
    }
}

//! Prompt caching (`runner.md` 1, decision 44) through the binary on all three wire APIs: each
//! request of a session, `cache_control` members removed, starts with the previous request's
//! bytes but its closing `]}` (the conversation is the body's last member and only grows),
//! across the steps of a tool loop and into the next turn; Anthropic marks the system block and
//! the newest message's last block; every Responses request carries `prompt_cache_key` = the
//! session ID.

use crate::code_mode_wire::responses_call;
use crate::common::anthropic_sse::{reply, stop, text as a_text, tool_use};
use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm, Reply, Seen};
use crate::common::responses_sse::text as r_text;
use crate::common::{run_turn, start_session, Env};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;
const BREAKPOINT: &str = "\"cache_control\":{\"type\":\"ephemeral\"},";

/// Two turns on `env`: the first reads two files in two steps, the second only answers.
fn two_turns(env: &Env, llm: &FakeLlm) -> (String, Vec<Seen>) {
    std::fs::write(env.cwd.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(env.cwd.join("b.txt"), "beta\n").unwrap();
    let (mut s, sid) = start_session(env, &[]);
    for prompt in ["read a then b", "and now?"] {
        let frames = run_turn(&mut s, &sid, prompt);
        assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    }
    let seen: Vec<Seen> = (0..4).map(|_| llm.next(WAIT)).collect();
    (sid, seen)
}

/// The prefix rule between consecutive requests; the mean shared-prefix ratio.
fn prefixes_hold(seen: &[Seen]) -> f64 {
    let bodies: Vec<String> = seen
        .iter()
        .map(|s| {
            String::from_utf8(s.raw.clone())
                .unwrap()
                .replace(BREAKPOINT, "")
        })
        .collect();
    let mut ratios = Vec::new();
    for w in bodies.windows(2) {
        let (prev, next) = (&w[0], &w[1]);
        assert!(prev.ends_with("]}"), "{prev}");
        let stem = &prev[..prev.len() - 2];
        assert!(
            next.starts_with(stem),
            "a request does not extend the one before:\n{prev}\n{next}"
        );
        ratios.push(stem.len() as f64 / next.len() as f64);
    }
    ratios.iter().sum::<f64>() / ratios.len() as f64
}

#[test]
fn chat_requests_extend_each_other() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("c1", "read_file", r#"{"path":"a.txt"}"#),
        chat_tool_call("c2", "read_file", r#"{"path":"b.txt"}"#),
        chat_text(&["done"]),
        chat_text(&["still done"]),
    ]);
    let env = crate::common::fake_llm_env(&llm, &json!({"tools": {"read": "allow"}}));
    let (_, seen) = two_turns(&env, &llm);
    let ratio = prefixes_hold(&seen);
    assert!(ratio > 0.5, "{ratio}");
}

/// [`two_turns`] on the built-in `anthropic` provider, its settings joined by `extra`.
fn anthropic_turns(extra: &serde_json::Value) -> Vec<Seen> {
    let call = |id: &str, path: &str| -> Reply {
        reply(vec![
            tool_use(0, id, "read_file", &json!({"path": path}).to_string()),
            stop("tool_use"),
        ])
    };
    let llm = FakeLlm::start(vec![
        call("toolu_1", "a.txt"),
        call("toolu_2", "b.txt"),
        reply(vec![a_text(0, "done"), stop("end_turn")]),
        reply(vec![a_text(0, "still done"), stop("end_turn")]),
    ]);
    let mut provider = json!({"base_url": llm.base});
    for (k, v) in extra.as_object().unwrap() {
        provider[k] = v.clone();
    }
    let mut env = Env::new();
    env.set_var("ANTHROPIC_API_KEY", "sk-ant-test-key-123");
    env.write_global_settings(&json!({
        "provider": "anthropic", "model": "claude-sonnet-4-5",
        "providers": {"anthropic": provider},
        "tools": {"read": "allow"},
    }));
    two_turns(&env, &llm).1
}

#[test]
fn anthropic_requests_extend_each_other_and_mark_two_breakpoints() {
    let seen = anthropic_turns(&json!({}));
    for s in &seen {
        let raw = String::from_utf8(s.raw.clone()).unwrap();
        assert_eq!(raw.matches("cache_control").count(), 2, "{raw}");
        let msgs = s.body["messages"].as_array().unwrap();
        let last = msgs.last().unwrap()["content"].as_array().unwrap();
        assert_eq!(
            last.last().unwrap()["cache_control"],
            json!({"type": "ephemeral"})
        );
    }
    prefixes_hold(&seen);
}

/// [`two_turns`] on the built-in `openai` provider (Responses), its settings joined by `extra`.
fn responses_turns(extra: &serde_json::Value) -> (String, Vec<Seen>) {
    let llm = FakeLlm::start(vec![
        responses_call("call_1", "read_file", r#"{"path":"a.txt"}"#),
        responses_call("call_2", "read_file", r#"{"path":"b.txt"}"#),
        r_text("done"),
        r_text("still done"),
    ]);
    let mut provider = json!({"base_url": format!("{}/v1", llm.base)});
    for (k, v) in extra.as_object().unwrap() {
        provider[k] = v.clone();
    }
    let mut env = Env::new();
    env.set_var("OPENAI_API_KEY", "sk-test-openai-key");
    env.write_global_settings(&json!({
        "provider": "openai", "model": "gpt-x",
        "providers": {"openai": provider},
        "tools": {"read": "allow"},
    }));
    two_turns(&env, &llm)
}

#[test]
fn responses_requests_extend_each_other_and_carry_the_session_as_cache_key() {
    let (sid, seen) = responses_turns(&json!({}));
    for s in &seen {
        assert_eq!(s.body["prompt_cache_key"], sid.as_str(), "{}", s.body);
    }
    prefixes_hold(&seen);
}

/// `providers.<name>.prompt_caching: false` (`runner.md` 1): no cache markers at all, the
/// Anthropic `system` one plain string, no `prompt_cache_key`; requests still extend each
/// other.
#[test]
fn prompt_caching_off_sends_no_markers() {
    let seen = anthropic_turns(&json!({"prompt_caching": false}));
    for s in &seen {
        let raw = String::from_utf8(s.raw.clone()).unwrap();
        assert!(!raw.contains("cache_control"), "{raw}");
        assert!(s.body["system"].is_string(), "{}", s.body["system"]);
    }
    prefixes_hold(&seen);
    let (_, seen) = responses_turns(&json!({"prompt_caching": false}));
    for s in &seen {
        assert!(s.body.get("prompt_cache_key").is_none(), "{}", s.body);
    }
}

/// The `usage` records of session `sid`'s file.
fn usage_records(env: &Env, sid: &str) -> Vec<serde_json::Value> {
    let file = crate::common::sessions_dir(env).join(format!("{sid}.jsonl"));
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["type"] == "usage")
        .collect()
}

#[test]
fn cached_input_tokens_are_stored_in_usage_records_on_anthropic_and_responses() {
    use crate::common::anthropic_sse::ev;
    let start = ev(
        &json!({"type": "message_start", "message": {"id": "m", "type": "message",
        "role": "assistant", "content": [], "usage": {"input_tokens": 4,
        "cache_read_input_tokens": 30, "cache_creation_input_tokens": 7, "output_tokens": 1}}}),
    );
    let mut parts = vec![vec![start]];
    parts.push(a_text(0, "hi"));
    parts.push(stop("end_turn"));
    let llm = FakeLlm::start(vec![Reply::sse(parts.concat())]);
    let mut env = Env::new();
    env.set_var("ANTHROPIC_API_KEY", "sk-ant-test-key-123");
    env.write_global_settings(&json!({
        "provider": "anthropic", "model": "claude-sonnet-4-5",
        "providers": {"anthropic": {"base_url": llm.base}},
    }));
    let (mut s, sid) = start_session(&env, &[]);
    run_turn(&mut s, &sid, "hello");
    let u = usage_records(&env, &sid);
    assert_eq!(u.len(), 1, "{u:?}");
    assert_eq!(u[0]["cached_input_tokens"], 30);
    assert_eq!(u[0]["cache_creation_input_tokens"], 7);
    assert_eq!(u[0]["input_tokens"], 41, "reads and writes count as input");

    let llm = FakeLlm::start(vec![r_text("hi")]);
    let mut env = Env::new();
    env.set_var("OPENAI_API_KEY", "sk-test-openai-key");
    env.write_global_settings(&json!({
        "provider": "openai", "model": "gpt-x",
        "providers": {"openai": {"base_url": format!("{}/v1", llm.base)}},
    }));
    let (mut s, sid) = start_session(&env, &[]);
    run_turn(&mut s, &sid, "hello");
    let u = usage_records(&env, &sid);
    assert_eq!(u[0]["cached_input_tokens"], 20, "{u:?}");
}

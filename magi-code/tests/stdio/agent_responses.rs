//! The agent loop against a fake Responses API server (`provider-streams.md` 3): function calls
//! final at `output_item.done`, encrypted reasoning passed back to the provider that made it,
//! effort as `reasoning`, and a session that moves from Anthropic to OpenAI after
//! `selection.set` and replays its earlier turn from stored records.

use crate::common::fake_llm::{FakeLlm, Reply};
use crate::common::responses_sse::{completed, ev, text};
use crate::common::{entry_kinds, result, run_turn, start_session, write_catalog_cache, Env};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;

/// A reasoning item with a summary and encrypted content, then a `read_file` call.
fn reasoning_then_call() -> Reply {
    let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "**Planning** I will read the file."}], "encrypted_content": "gAAAA-secret"});
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file", "arguments": "{\"path\":\"a.txt\"}", "status": "completed"});
    Reply::sse(vec![
        ev(
            &json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        ),
        ev(
            &json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        ),
        ev(
            &json!({"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": reasoning}),
        ),
        ev(
            &json!({"type": "response.output_item.added", "sequence_number": 3, "output_index": 1, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_0", "name": "read_file", "arguments": ""}}),
        ),
        ev(
            &json!({"type": "response.function_call_arguments.delta", "sequence_number": 4, "item_id": "fc_1", "output_index": 1, "delta": "{\"path\":"}),
        ),
        ev(
            &json!({"type": "response.function_call_arguments.delta", "sequence_number": 5, "item_id": "fc_1", "output_index": 1, "delta": "\"a.txt\"}"}),
        ),
        ev(
            &json!({"type": "response.output_item.done", "sequence_number": 6, "output_index": 1, "item": call}),
        ),
        completed(7),
    ])
}

#[test]
fn function_calls_and_encrypted_reasoning_go_back_as_input_items() {
    let llm = FakeLlm::start(vec![reasoning_then_call(), text("It says alpha.")]);
    let mut env = Env::new();
    env.set_var("OPENAI_API_KEY", "sk-test-openai-key");
    env.write_global_settings(&json!({
        "provider": "openai", "model": "gpt-x",
        "providers": {"openai": {"base_url": format!("{}/v1", llm.base), "max_output_tokens": 2000}},
        "tools": {"read": "allow"},
    }));
    std::fs::write(env.cwd.join("a.txt"), "alpha\n").unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "what is in a.txt?");
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "completed", "{frames:#?}");
    assert!(!frames
        .iter()
        .any(|f| f.to_string().contains("gAAAA-secret")));

    let first = llm.next(WAIT);
    assert_eq!(first.path, "/v1/responses");
    assert_eq!(first.body["store"], false);
    assert_eq!(first.body["max_output_tokens"], 2000);
    assert!(first.body["instructions"]
        .as_str()
        .unwrap()
        .contains("magi-code"));
    assert!(
        first.body.get("reasoning").is_none(),
        "default effort sends none"
    );
    assert!(first
        .headers
        .iter()
        .any(|(k, v)| k == "authorization" && v == "Bearer sk-test-openai-key"));
    let second = llm.next(WAIT);
    let input = second.body["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(input[1]["encrypted_content"], "gAAAA-secret");
    assert_eq!(
        input[2]["call_id"], "call_1",
        "the done item's call_id wins"
    );
    assert_eq!(input[3]["call_id"], "call_1");
    assert!(input[3]["output"].as_str().unwrap().contains("alpha"));

    let rev = fin["revision"].as_str().unwrap();
    let page = s.call(
        "p",
        "history.page",
        &json!({"session_id": sid, "revision": rev}),
    );
    let kinds = entry_kinds(result(&page)["entries"].as_array().unwrap());
    assert_eq!(
        kinds,
        ["user", "reasoning_summary", "activity", "assistant"]
    );
    assert!(!page.to_string().contains("gAAAA-secret"));
}

#[test]
fn a_session_continues_on_another_provider_after_selection_set() {
    let ev_a = |data: Value| {
        format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        )
    };
    let anthropic = FakeLlm::start(vec![Reply::sse(vec![
        ev_a(
            json!({"type": "message_start", "message": {"id": "m", "content": [], "usage": {"input_tokens": 5}}}),
        ),
        ev_a(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        ev_a(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        ),
        ev_a(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}}),
        ),
        ev_a(json!({"type": "content_block_stop", "index": 0})),
        ev_a(
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
        ev_a(
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Claude here."}}),
        ),
        ev_a(json!({"type": "content_block_stop", "index": 1})),
        ev_a(json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}})),
        ev_a(json!({"type": "message_stop"})),
    ])]);
    let openai = FakeLlm::start(vec![text("GPT here.")]);
    let mut env = Env::new();
    env.set_var("ANTHROPIC_API_KEY", "dummy-a");
    env.set_var("OPENAI_API_KEY", "dummy-o");
    env.write_global_settings(&json!({
        "provider": "anthropic", "model": "claude-x",
        "providers": {
            "catalog": {"enabled": ["anthropic/claude-x", "openai/gpt-x"]},
            "anthropic": {"base_url": anthropic.base},
            "openai": {"base_url": format!("{}/v1", openai.base)},
        },
    }));
    write_catalog_cache(
        &env,
        "anthropic",
        json!([{"id": "claude-x", "efforts": ["low", "high"]}]),
    );
    write_catalog_cache(
        &env,
        "openai",
        json!([{"id": "gpt-x", "efforts": ["low", "high"]}]),
    );
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "who are you?");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");

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
        &json!({"session_id": sid, "selection_revision": sel, "catalog_revision": cat, "provider": "openai", "model": "gpt-x", "effort": {"mode": "set", "value": "high"}}),
    );
    assert_eq!(result(&set)["durable"], true, "{set}");
    let frames = run_turn(&mut s, &sid, "and now?");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let req = openai.next(WAIT);
    assert_eq!(req.body["model"], "gpt-x");
    assert_eq!(
        req.body["reasoning"],
        json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(req.body["include"], json!(["reasoning.encrypted_content"]));
    let input = req.body["input"].as_array().unwrap();
    assert_eq!(input.len(), 3, "user, assistant, user: {input:#?}");
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[1]["role"], "assistant");
    assert_eq!(input[1]["content"][0]["text"], "Claude here.");
    assert_eq!(input[2]["role"], "user");
    assert!(
        !req.body.to_string().contains("SIG"),
        "Anthropic's signed thinking never goes to OpenAI"
    );
}

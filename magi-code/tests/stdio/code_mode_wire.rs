//! Code Mode on each wire API and at its bounds (`code-mode.md` 3, 4, 6): `exec` is a function
//! tool with exactly its input schema on Chat Completions, Anthropic Messages and Responses,
//! its result goes back as that API's tool result (an error result unless `exec completed`);
//! with `tool.cards` `exec` has a `generic` card and nested calls their own kind's; nested
//! outputs and the result are bounded to 64 KiB.

use crate::code_mode::{code_env, exec, header_ok, tool_result, WAIT};
use crate::common::anthropic_sse::{reply, stop, text as a_text, tool_use};
use crate::common::fake_llm::{chat_text, FakeLlm, Reply};
use crate::common::responses_sse::{completed, ev, text as r_text};
use crate::common::{chat_tool_names, events, run_turn, start_session, until_finished, Env};
use serde_json::{json, Value};

/// `exec`'s input schema, exactly (`code-mode.md` 8).
fn exec_schema() -> Value {
    json!({"type":"object","properties":{"code":{"type":"string"}},"required":["code"]})
}

fn anthropic_env(llm: &FakeLlm) -> Env {
    let mut env = Env::new();
    env.set_var("ANTHROPIC_API_KEY", "sk-ant-test-key-123");
    env.write_global_settings(&json!({
        "provider": "anthropic", "model": "claude-sonnet-4-5",
        "providers": {"anthropic": {"base_url": llm.base}},
        "code_mode": {"enabled": true},
    }));
    env
}

#[test]
fn on_anthropic_exec_is_a_tool_and_its_result_a_tool_result_block() {
    let llm = FakeLlm::start(vec![
        reply(vec![
            tool_use(0, "toolu_1", "exec", r#"{"code":"return 6 * 7"}"#),
            stop("tool_use"),
        ]),
        reply(vec![
            tool_use(0, "toolu_2", "exec", r#"{"code":"throw new Error('no')"}"#),
            stop("tool_use"),
        ]),
        reply(vec![a_text(0, "done"), stop("end_turn")]),
    ]);
    let env = anthropic_env(&llm);
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "compute");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let first = llm.next(WAIT);
    let tool = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "exec")
        .expect("exec offered")
        .clone();
    assert_eq!(tool["input_schema"], exec_schema());
    assert!(tool["description"]
        .as_str()
        .unwrap()
        .contains("read_file(input: {path: string"));
    let result_block = |seen: &crate::common::fake_llm::Seen, id: &str| -> Value {
        let msgs = seen.body["messages"].as_array().unwrap();
        let user = &msgs[msgs.len() - 1];
        user["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
            .unwrap_or_else(|| panic!("no tool_result for {id}: {user}"))
            .clone()
    };
    let ok = result_block(&llm.next(WAIT), "toolu_1");
    let text = ok["content"].as_str().unwrap_or_default().to_owned();
    let text = if text.is_empty() {
        ok["content"][0]["text"].as_str().unwrap().to_owned()
    } else {
        text
    };
    header_ok(&text, "exec completed", 0);
    assert!(text.ends_with("\n42"), "{text}");
    assert_ne!(ok["is_error"], true);
    let failed = result_block(&llm.next(WAIT), "toolu_2");
    assert_eq!(failed["is_error"], true, "{failed}");
    assert!(failed.to_string().contains("exec failed"), "{failed}");
}

/// A Responses reply calling `name` with `arguments` as `call_id`.
pub(crate) fn responses_call(call_id: &str, name: &str, arguments: &str) -> Reply {
    let item = json!({"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name, "arguments": arguments, "status": "completed"});
    Reply::sse(vec![
        ev(
            &json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        ),
        ev(
            &json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name, "arguments": ""}}),
        ),
        ev(
            &json!({"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": item}),
        ),
        completed(3),
    ])
}

#[test]
fn on_responses_exec_is_a_function_and_its_result_a_function_call_output() {
    let llm = FakeLlm::start(vec![
        responses_call(
            "call_1",
            "exec",
            r#"{"code":"console.log('hi')\nreturn [1]"}"#,
        ),
        r_text("done"),
    ]);
    let mut env = Env::new();
    env.set_var("OPENAI_API_KEY", "sk-test-openai-key");
    env.write_global_settings(&json!({
        "provider": "openai", "model": "gpt-x",
        "providers": {"openai": {"base_url": format!("{}/v1", llm.base)}},
        "code_mode": {"enabled": true},
    }));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "compute");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let first = llm.next(WAIT);
    let tool = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "exec")
        .expect("exec offered")
        .clone();
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["parameters"], exec_schema());
    let second = llm.next(WAIT);
    let output = second.body["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call_output" && i["call_id"] == "call_1")
        .unwrap_or_else(|| panic!("no output: {:#}", second.body))["output"]
        .as_str()
        .unwrap()
        .to_owned();
    header_ok(&output, "exec completed", 0);
    assert!(output.ends_with("\nhi\n[1]"), "{output}");
}

#[test]
fn on_chat_exec_has_exactly_its_schema() {
    let llm = FakeLlm::start(vec![chat_text(&["hi"])]);
    let env = code_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    run_turn(&mut s, &sid, "hello");
    let first = llm.next(WAIT);
    assert!(chat_tool_names(&first.body).contains(&"exec".to_owned()));
    let tool = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "exec")
        .unwrap()
        .clone();
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["function"]["parameters"], exec_schema());
}

#[test]
fn with_tool_cards_exec_is_generic_and_a_nested_read_is_file_read() {
    let code = "return (await tools.read_file({path: \"a.txt\"})).length";
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["ok"])]);
    let env = code_env(&llm, &json!({}));
    std::fs::write(env.cwd.join("a.txt"), "one\ntwo\n").unwrap();
    let (mut s, sid) = start_session(&env, &["tool.cards"]);
    crate::common::start_turn(&mut s, &sid, "read");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    // Each card follows its activity; pair them by activity id.
    let acts = events(&frames, "activity");
    let name_of = |id: &Value| -> String {
        acts.iter()
            .find(|a| a["data"]["activity_id"] == *id)
            .map(|a| a["data"]["name"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    let finals: Vec<(String, Value)> = events(&frames, "tool.card")
        .into_iter()
        .filter(|c| c["data"]["card"]["status"] != "running")
        .map(|c| {
            (
                name_of(&c["data"]["activity_id"]),
                c["data"]["card"].clone(),
            )
        })
        .collect();
    let exec_card = &finals
        .iter()
        .find(|(n, _)| n == "exec")
        .expect("exec card")
        .1;
    assert_eq!(exec_card["kind"], "generic", "{exec_card}");
    assert_eq!(exec_card["status"], "completed");
    let read_card = &finals
        .iter()
        .find(|(n, _)| n == "read_file")
        .expect("nested read card")
        .1;
    assert_eq!(read_card["kind"], "file_read", "{read_card}");
    assert_eq!(read_card["status"], "completed");
    // The nested card comes before exec's final card: the cell ends after its calls.
    let at = |name: &str| finals.iter().position(|(n, _)| n == name).unwrap();
    assert!(at("read_file") < at("exec"));
}

#[test]
fn nested_outputs_and_the_result_are_bounded_to_64_kib() {
    let code = "const t = await tools.read_file({path: \"big.txt\"});\n\
                text(\"nested \" + t.length);\nreturn \"y\".repeat(300000);";
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["ok"])]);
    let env = code_env(&llm, &json!({}));
    std::fs::write(env.cwd.join("big.txt"), "x".repeat(300_000)).unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    crate::common::start_turn(&mut s, &sid, "read big");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    assert!(text.len() <= 64 * 1024, "{}", text.len());
    header_ok(&text, "exec completed", 1);
    let nested: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("nested "))
        .and_then(|n| n.parse().ok())
        .expect("the nested length line");
    assert!(
        nested <= 64 * 1024,
        "the code got {nested} bytes of a 300,000-byte file"
    );
}

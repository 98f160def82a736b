//! Code Mode's exact readings through the real binary (`code-mode.md` 3 and 8): fences and the
//! model's line numbers, the 256 KiB code bound at its edge, `exec: N lines`, `ALL_TOOLS` and
//! `describe`, declarations up to 20 reachable tools and names past them, the runaway row
//! across nested calls, and `store`'s 1 MiB.

use crate::code_mode::{code_env, exec, header_ok, tool_result, WAIT};
use crate::common::fake_llm::{chat_text, FakeLlm};
use crate::common::{chat_tool_names, events, result, start_session, start_turn, until_finished};
use crate::common::{Env, Server};
use serde_json::{json, Value};

/// Runs one turn whose model calls `exec` with `code` as `c1`: the frames, the first request's
/// body and the result text the model got.
fn one_cell(env_of: impl FnOnce(&FakeLlm) -> Env, code: &str) -> (Vec<Value>, Value, String) {
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["ok"])]);
    let env = env_of(&llm);
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "code");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let first = llm.next(WAIT).body;
    let text = tool_result(&llm.next(WAIT), "c1");
    (frames, first, text)
}

fn default_env(llm: &FakeLlm) -> Env {
    code_env(llm, &json!({}))
}

/// The `exec` activities' (state, summary).
fn exec_activities(frames: &[Value]) -> Vec<(String, String)> {
    events(frames, "activity")
        .iter()
        .filter(|a| a["data"]["name"] == "exec")
        .map(|a| {
            (
                a["data"]["state"].as_str().unwrap().to_owned(),
                a["data"]["summary"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_fence_is_removed_and_errors_count_lines_from_after_it() {
    let code = "```js\nconst x = 1;\nthrow new Error(\"boom \" + x);\n```";
    let (frames, _, text) = one_cell(default_env, code);
    header_ok(&text, "exec failed", 0);
    let body: Vec<&str> = text.lines().skip(2).collect();
    assert_eq!(body[0], "Error: boom 1", "{text}");
    assert!(body.iter().any(|l| l.contains("code:2:")), "{text}");
    // The summary counts the lines as sent, fence included.
    assert_eq!(
        exec_activities(&frames),
        [
            ("started".to_owned(), "exec: 4 lines".to_owned()),
            ("failed".to_owned(), "exec: 4 lines".to_owned())
        ]
    );
}

#[test]
fn a_final_lf_starts_no_line_and_one_line_is_singular() {
    let (frames, _, text) = one_cell(default_env, "return 5\n");
    header_ok(&text, "exec completed", 0);
    assert!(text.ends_with("\n5"), "{text}");
    assert_eq!(
        exec_activities(&frames),
        [
            ("started".to_owned(), "exec: 1 line".to_owned()),
            ("completed".to_owned(), "exec: 1 line".to_owned())
        ]
    );
}

#[test]
fn code_of_256_kib_runs_and_one_byte_more_is_refused() {
    let fill = |n: usize| format!("return 1//{}", "x".repeat(n - 10));
    let at = fill(256 * 1024);
    assert_eq!(at.len(), 256 * 1024);
    let (_, _, text) = one_cell(default_env, &at);
    header_ok(&text, "exec completed", 0);
    let (frames, _, text) = one_cell(default_env, &fill(256 * 1024 + 1));
    assert_eq!(text, "exec refused: code over 256 KiB");
    assert_eq!(exec_activities(&frames)[1].0, "failed");
}

#[test]
fn all_tools_lists_exactly_the_reachable_tools_in_name_order_and_describe_each() {
    let code = "return [ALL_TOOLS.map(t => t.name), ALL_TOOLS.every(t => typeof t.description === \"string\"), \
                describe(\"read_file\"), describe(\"exec\"), describe(\"nope\"), typeof tools.nope, \"exec\" in tools]";
    let (_, first, text) = one_cell(default_env, code);
    header_ok(&text, "exec completed", 0);
    let got: Value = serde_json::from_str(text.lines().nth(2).unwrap()).unwrap();
    let mut offered: Vec<String> = chat_tool_names(&first)
        .into_iter()
        .filter(|n| n != "exec")
        .collect();
    offered.sort();
    assert_eq!(got[0], json!(offered));
    assert_eq!(got[1], true);
    let read = got[2].as_str().unwrap();
    assert!(
        read.starts_with("read_file(input: {path: string") && read.ends_with("}): Promise<string>"),
        "{read}"
    );
    assert!(!read.contains('\n'));
    assert_eq!(got[3], Value::Null);
    assert_eq!(got[4], Value::Null);
    assert_eq!(got[5], "function");
    assert_eq!(got[6], false);
}

/// A client tool named `name`.
fn client_tool(name: &str) -> Value {
    json!({
        "name": name,
        "description": format!("Client tool {name}."),
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    })
}

/// A child in `env` initialized with `client.tools` declaring `n` tools, and a session.
fn with_client_tools(env: &Env, n: usize) -> (Server, String) {
    let mut s = env.spawn();
    let tools: Vec<Value> = (0..n).map(|i| client_tool(&format!("ct{i:02}"))).collect();
    let init = s.call(
        "init",
        "initialize",
        &json!({"required_capabilities": ["client.tools"], "client_tools": tools}),
    );
    assert!(init.get("result").is_some(), "{init}");
    let sid = result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (s, sid)
}

/// The `exec` description and the `describe`d declaration of `ct00` with `n` client tools.
fn described_with(n: usize) -> (usize, String, String) {
    let llm = FakeLlm::start(vec![
        exec("c1", "return describe(\"ct00\")"),
        chat_text(&["ok"]),
    ]);
    let env = default_env(&llm);
    let (mut s, sid) = with_client_tools(&env, n);
    start_turn(&mut s, &sid, "describe");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let first = llm.next(WAIT).body;
    let reachable = chat_tool_names(&first).len() - 1;
    let desc = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "exec")
        .unwrap()["function"]["description"]
        .as_str()
        .unwrap()
        .to_owned();
    let text = tool_result(&llm.next(WAIT), "c1");
    (reachable, desc, text)
}

#[test]
fn twenty_reachable_tools_are_declared_and_the_twenty_first_lists_names_with_describe() {
    let (base, _, _) = described_with(1);
    let base = base - 1;
    assert!(base < 20, "{base} built-in tools");
    let (reachable, desc, text) = described_with(20 - base);
    assert_eq!(reachable, 20);
    assert!(
        desc.contains("\nct00(input: {q: string}): Promise<string>"),
        "{desc}"
    );
    assert!(
        !desc.contains("describe(name) for one's declaration"),
        "{desc}"
    );
    assert!(
        text.ends_with("\n\"ct00(input: {q: string}): Promise<string>\""),
        "{text}"
    );
    let (reachable, desc, text) = described_with(21 - base);
    assert_eq!(reachable, 21);
    assert!(desc.contains("Tools (21); call describe(name)"), "{desc}");
    assert!(desc.contains("\nct00: Client tool ct00."), "{desc}");
    assert!(!desc.contains("Promise<string>"), "{desc}");
    assert!(
        text.ends_with("\n\"ct00(input: {q: string}): Promise<string>\""),
        "{text}"
    );
}

#[test]
fn a_third_equal_nested_call_in_a_row_is_refused_limit() {
    let code = "const r = [];\nfor (let i = 0; i < 3; i++) {\n  try { await tools.read_file({path: \"a.txt\"}); r.push(\"ok\"); }\n  catch (e) { r.push(e.code); }\n}\nreturn r;";
    let env_of = |llm: &FakeLlm| {
        let env = default_env(llm);
        std::fs::write(env.cwd.join("a.txt"), "a\n").unwrap();
        env
    };
    let (_, _, text) = one_cell(env_of, code);
    header_ok(&text, "exec completed", 3);
    assert!(text.ends_with("\n[\"ok\",\"ok\",\"limit\"]"), "{text}");
}

#[test]
fn store_past_1_mib_throws_limit_and_changes_nothing() {
    let code = "store(\"a\", \"x\".repeat(1024 * 1024 - 10));\nlet code = null;\n\
                try { store(\"b\", \"yyyyyyyyyy\"); } catch (e) { code = [e.name, e.code]; }\n\
                return [code, load(\"b\"), load(\"a\").length];";
    let (_, _, text) = one_cell(default_env, code);
    header_ok(&text, "exec completed", 0);
    assert!(
        text.ends_with("\n[[\"ToolError\",\"limit\"],null,1048566]"),
        "{text}"
    );
}

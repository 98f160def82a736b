//! What of an MCP server's tool list reaches the model (decisions.md 37): descriptions cut at
//! 4,096 bytes on a character boundary, names outside the grammar or over 64 bytes and input
//! schemas that do not compile left out, and the left-out tools reported once per child in a
//! `diagnostic` `mcp_tools_left_out`.

use crate::common::fake_llm::{chat_text, FakeLlm};
use crate::common::{events, run_turn, start_session, Env, STEP};
use crate::mcp::{fake, mcp_settings};
use serde_json::{json, Value};

#[test]
fn descriptions_and_names_at_their_bounds_and_left_out_tools_reported_once() {
    let llm = FakeLlm::start(vec![chat_text(&["one"]), chat_text(&["two"])]);
    let env = Env::new();
    let def = fake("edges");
    env.use_fake_llm(
        &llm,
        &json!({"tools": {"mcp": "allow"}, "mcp": mcp_settings(&[("fake", &def)], true)}),
    );
    let (mut s, sid) = start_session(&env, &[]);
    let first = run_turn(&mut s, &sid, "go");
    assert_eq!(first.last().unwrap()["data"]["outcome"], "completed");
    let body = llm.next(STEP).body;
    let tools = body["tools"].as_array().unwrap();
    let desc = |name: &str| -> String {
        tools
            .iter()
            .find(|t| t["function"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} not offered"))["function"]["description"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(desc("mcp__fake__d4096"), "a".repeat(4096), "kept whole");
    assert_eq!(desc("mcp__fake__d4097"), "a".repeat(4096), "cut to 4,096");
    assert_eq!(desc("mcp__fake__dmulti"), "a".repeat(4095), "é not split");
    let longest = format!("mcp__fake__{}", "n".repeat(53));
    assert_eq!(longest.len(), 64);
    assert_eq!(desc(&longest), "longest name");
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");

    let diags: Vec<&Value> = events(&first, "diagnostic");
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0]["data"]["code"], "mcp_tools_left_out");
    let summary = diags[0]["data"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("3 MCP tools are not offered"),
        "{summary}"
    );
    assert!(
        summary.ends_with(&format!(
            ": fake/{}, fake/bad.name, fake/badschema",
            "n".repeat(54)
        )),
        "{summary}"
    );
    let second = run_turn(&mut s, &sid, "again");
    assert!(
        events(&second, "diagnostic").is_empty(),
        "reported once per child"
    );
    s.shutdown_ok("bye");
}

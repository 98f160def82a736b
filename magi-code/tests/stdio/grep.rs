//! `grep` over real pipes: a file bigger than the walk's 1 MiB bound is searched when `path`
//! names it, and a walk says how many such files it left out, to the model and in the
//! activity's summary (issue 14: it used to answer a silent `0 matches`).

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm};
use crate::common::{
    events, fake_llm_env, last_tool_result, run_turn, start_session, write_script, Env, STEP,
};
use serde_json::{json, Value};

/// A 2 MiB text file whose last line holds the needle.
fn big_file(env: &Env) {
    let mut text = format!("{}\n", "z".repeat(1023)).repeat(2048);
    text.push_str("the needle at the end\n");
    std::fs::write(env.cwd.join("big.log"), text).unwrap();
}

fn completed_summaries(frames: &[Value]) -> Vec<String> {
    events(frames, "activity")
        .iter()
        .filter(|a| a["data"]["state"] == "completed")
        .map(|a| a["data"]["summary"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn grep_searches_a_named_big_file_and_a_walk_reports_the_big_files_it_skipped() {
    let env = Env::new();
    big_file(&env);
    write_script(
        &env,
        json!([
            {"steps": [{"tool": {"name": "grep", "input": {"pattern": "needle", "path": "big.log"}}}, {"text": "a"}]},
            {"steps": [{"tool": {"name": "grep", "input": {"pattern": "needle"}}}, {"text": "b"}]},
        ]),
        Some(json!({"read": "allow"})),
    );
    let (mut s, sid) = start_session(&env, &[]);
    let named = run_turn(&mut s, &sid, "named");
    assert_eq!(named.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(
        completed_summaries(&named),
        ["grep needle in big.log: 1 matches"]
    );
    let walked = run_turn(&mut s, &sid, "walk");
    assert_eq!(
        completed_summaries(&walked),
        ["grep needle in .: 0 matches; 1 file over 1 MiB skipped"]
    );
    s.shutdown_ok("bye");
}

#[test]
fn the_model_is_told_which_big_files_a_walk_skipped_and_sees_a_named_ones_matches() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("w", "grep", r#"{"pattern":"needle"}"#),
        chat_tool_call("n", "grep", r#"{"pattern":"needle","path":"big.log"}"#),
        chat_text(&["done"]),
    ]);
    let env = fake_llm_env(&llm, &json!({"tools": {"read": "allow"}}));
    big_file(&env);
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "find the needle");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let _first = llm.next(STEP);
    let (id, walk) = last_tool_result(&llm.next(STEP).body);
    assert_eq!(id, "w");
    assert_eq!(
        walk,
        "[1 file over 1 MiB not searched: name one as path to search it]\n"
    );
    let (id, named) = last_tool_result(&llm.next(STEP).body);
    assert_eq!(id, "n");
    assert_eq!(named, "big.log:2049:the needle at the end\n");
    s.shutdown_ok("bye");
}

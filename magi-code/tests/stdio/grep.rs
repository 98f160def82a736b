//! `grep` and `glob` through the binary (`backend.md` "Tools and approvals"): in a git
//! repository the model gets only what ripgrep would show (no ignored folder, no global
//! excludes), sorted, bounded at 500 with the count of the rest; a big file is searched whole;
//! `glob` lists by name, newest first, with a `search` card.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm};
use crate::common::{
    events, fake_llm_env, last_tool_result, run_turn, start_session, write_script, Env, STEP,
};
use serde_json::{json, Value};
use std::path::Path;

/// Writes `text` at `p`, creating its folders.
fn put(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A repository in the env's cwd: planted needles in ignored places (a `.gitignore`d
/// `node_modules/` and `dist/`, the user's global excludes file), two in real sources, one at
/// the end of a 2 MiB log.
fn repository(env: &Env) {
    let cwd = &env.cwd;
    std::fs::create_dir_all(cwd.join(".git")).unwrap();
    put(&cwd.join(".gitignore"), "node_modules/\ndist/\n");
    // The global excludes file git reads when `core.excludesFile` is not set.
    put(&env.root.join(".config/git/ignore"), "*.secret\n");
    for i in 0..200 {
        put(
            &cwd.join(format!("node_modules/p{i}/index.js")),
            "needle\nneedle\n",
        );
    }
    put(&cwd.join("dist/bundle.js"), "needle\n");
    put(&cwd.join("keys.secret"), "needle\n");
    put(&cwd.join("src/b.rs"), "// needle two\n");
    put(&cwd.join("src/a.rs"), "// needle one\n");
    let mut log = format!("{}\n", "z".repeat(1023)).repeat(2048);
    log.push_str("the needle at the end\n");
    put(&cwd.join("big.log"), &log);
}

fn completed_summaries(frames: &[Value]) -> Vec<String> {
    events(frames, "activity")
        .iter()
        .filter(|a| a["data"]["state"] == "completed")
        .map(|a| a["data"]["summary"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_model_gets_only_what_ripgrep_would_show_sorted() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("w", "grep", r#"{"pattern":"needle"}"#),
        chat_tool_call("n", "grep", r#"{"pattern":"needle","path":"node_modules"}"#),
        chat_text(&["done"]),
    ]);
    let env = fake_llm_env(&llm, &json!({"tools": {"read": "allow"}}));
    repository(&env);
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "find the needle");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let _first = llm.next(STEP);
    let (id, walk) = last_tool_result(&llm.next(STEP).body);
    assert_eq!(id, "w");
    assert_eq!(
        walk,
        "big.log:2049:the needle at the end\nsrc/a.rs:1:// needle one\nsrc/b.rs:1:// needle two\n"
    );
    // Naming the ignored folder searches it: 400 matches there, the first 500 in order.
    let (id, named) = last_tool_result(&llm.next(STEP).body);
    assert_eq!(id, "n");
    let lines: Vec<&str> = named.lines().collect();
    assert_eq!(lines.len(), 400);
    assert_eq!(lines[0], "node_modules/p0/index.js:1:needle");
    assert_eq!(
        completed_summaries(&frames),
        [
            "grep needle in .: 3 matches",
            "grep needle in node_modules: 400 matches"
        ]
    );
    s.shutdown_ok("bye");
}

#[test]
fn glob_finds_files_by_name_newest_first_with_a_search_card() {
    let env = Env::new();
    repository(&env);
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
    std::fs::File::options()
        .write(true)
        .open(env.cwd.join("src/b.rs"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    write_script(
        &env,
        json!([{"steps": [{"tool": {"name": "glob", "input": {"pattern": "*.rs"}}}, {"text": "a"}]}]),
        Some(json!({"read": "allow"})),
    );
    let (mut s, sid) = start_session(&env, &["tool.cards"]);
    let frames = run_turn(&mut s, &sid, "find sources");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(completed_summaries(&frames), ["glob *.rs in .: 2 files"]);
    let cards = events(&frames, "tool.card");
    let last = &cards.last().unwrap()["data"]["card"];
    assert_eq!(
        (&last["kind"], &last["title"], &last["matches"]),
        (&json!("search"), &json!("Find *.rs in ."), &json!(2)),
        "{last}"
    );
    s.shutdown_ok("bye");
}

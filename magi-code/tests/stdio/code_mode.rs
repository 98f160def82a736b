//! Code Mode over real pipes (`code-mode.md`): `exec` offered to the model and run in the
//! `code-host` helper, its result sent back, nested calls under their own policies, the
//! sandbox, the CPU bound, cancellation of a busy cell, the helper's life and its crash.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm, Seen};
pub(crate) use crate::common::procs::{alive, helpers};
use crate::common::{
    cancel_turn, chat_tool_names, events, fake_llm_env, is_event, start_session, start_turn,
    until_finished, until_match, Env, Server,
};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

pub(crate) const WAIT: Duration = crate::common::STEP;

/// A model reply calling `exec` with `code`.
pub(crate) fn exec(id: &str, code: &str) -> crate::common::fake_llm::Reply {
    chat_tool_call(id, "exec", &json!({ "code": code }).to_string())
}

/// Settings with Code Mode on, `extra` merged over it.
pub(crate) fn code_env(llm: &FakeLlm, extra: &Value) -> Env {
    let mut settings = json!({"code_mode": {"enabled": true}});
    merge(&mut settings, extra);
    fake_llm_env(llm, &settings)
}

pub(crate) fn merge(into: &mut Value, extra: &Value) {
    match (into, extra) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b.clone(),
    }
}

/// The content of the tool result with `call_id` in a request's messages.
pub(crate) fn tool_result(seen: &Seen, call_id: &str) -> String {
    seen.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no result for {call_id}: {:#}", seen.body))["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The one helper of `s`, waiting for it to appear (it starts with the first `exec`).
pub(crate) fn the_helper(s: &Server) -> u32 {
    let t0 = Instant::now();
    loop {
        if let [p] = helpers(s.pid())[..] {
            return p;
        }
        assert!(t0.elapsed() < WAIT, "no code-host child");
        std::thread::yield_now();
    }
}

/// Asserts the result's first two lines: exactly `state`, then `in X.Y s, N tool calls`.
pub(crate) fn header_ok(text: &str, state: &str, calls: u32) {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(state), "{text}");
    let second = lines.next().unwrap_or_default();
    let want = format!(" s, {calls} tool calls");
    assert!(
        second.starts_with("in ") && second.ends_with(&want),
        "{text}"
    );
}

#[test]
fn exec_returns_a_value_with_a_nested_read_and_the_model_gets_the_result() {
    let code = "const t = await tools.read_file({path: \"notes.txt\"});\n\
                console.log(\"read\", t.includes(\"hi there\"));\nreturn {n: 1 + 2};";
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["done"])]);
    let env = code_env(&llm, &json!({}));
    std::fs::write(env.cwd.join("notes.txt"), "hi there\n").unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "use code");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let first = llm.next(WAIT);
    assert!(chat_tool_names(&first.body).contains(&"exec".to_owned()));
    assert!(chat_tool_names(&first.body).contains(&"read_file".to_owned()));
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec completed", 1);
    assert!(text.ends_with("\nread true\n{\"n\":3}"), "{text}");
    let acts = events(&frames, "activity");
    let summaries: Vec<(&str, &str)> = acts
        .iter()
        .map(|a| {
            (
                a["data"]["summary"].as_str().unwrap_or_default(),
                a["data"]["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(summaries[0], ("exec: 3 lines", "started"), "{summaries:?}");
    assert!(summaries[1].0.starts_with("code: "), "{summaries:?}");
    assert_eq!(summaries.last().unwrap(), &("exec: 3 lines", "completed"));
}

#[test]
fn the_sandbox_has_no_ambient_authority() {
    let code = "return [typeof require, typeof fetch, typeof process, typeof setTimeout, \
                typeof Deno, typeof WebAssembly];";
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["ok"])]);
    let env = code_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "look around");
    until_finished(&mut s);
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec completed", 0);
    let undefined = r#"["undefined","undefined","undefined","undefined","undefined","undefined"]"#;
    assert!(text.ends_with(undefined), "{text}");
}

/// One direct `read_file` call and one from code, under `settings`; their results.
fn direct_and_nested(settings: &Value) -> (String, String) {
    let code = "try { return await tools.read_file({path: \"a.txt\"}); } \
                catch (e) { return [e.name, e.code]; }";
    let llm = FakeLlm::start(vec![
        chat_tool_call("d1", "read_file", r#"{"path":"a.txt"}"#),
        exec("c1", code),
        chat_text(&["ok"]),
    ]);
    let env = code_env(&llm, settings);
    std::fs::write(env.cwd.join("a.txt"), "alpha\n").unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "read twice");
    until_finished(&mut s);
    drop(llm.next(WAIT));
    let direct = tool_result(&llm.next(WAIT), "d1");
    let nested = tool_result(&llm.next(WAIT), "c1");
    (direct, nested)
}

#[test]
fn a_direct_deny_leaves_code_calls_allowed() {
    let (direct, nested) = direct_and_nested(&json!({
        "tools": {"read": "deny"}, "code_mode": {"tools": {"read": "allow"}},
    }));
    assert!(direct.contains("denied by policy"), "{direct}");
    header_ok(&nested, "exec completed", 1);
    assert!(nested.contains("alpha"), "{nested}");
}

#[test]
fn a_code_deny_leaves_direct_calls_allowed() {
    let (direct, nested) = direct_and_nested(&json!({
        "tools": {"read": "allow"}, "code_mode": {"tools": {"read": "deny"}},
    }));
    assert!(direct.contains("alpha"), "{direct}");
    header_ok(&nested, "exec completed", 1);
    assert!(nested.ends_with(r#"["ToolError","denied"]"#), "{nested}");
}

#[test]
fn with_only_the_model_sees_exec_and_task_and_other_tools_are_reached_from_code() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("d1", "read_file", r#"{"path":"a.txt"}"#),
        exec("c1", "return await tools.read_file({path: \"a.txt\"});"),
        chat_text(&["ok"]),
    ]);
    let env = code_env(&llm, &json!({"code_mode": {"only": true}}));
    std::fs::write(env.cwd.join("a.txt"), "alpha\n").unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "read");
    until_finished(&mut s);
    let first = llm.next(WAIT);
    let mut names = chat_tool_names(&first.body);
    names.sort();
    assert_eq!(names, ["exec", "task"]);
    let direct = tool_result(&llm.next(WAIT), "d1");
    assert!(direct.contains("unknown tool"), "{direct}");
    let nested = tool_result(&llm.next(WAIT), "c1");
    header_ok(&nested, "exec completed", 1);
    assert!(nested.contains("alpha"), "{nested}");
}

#[test]
fn a_busy_loop_stops_at_cpu_ms() {
    let llm = FakeLlm::start(vec![exec("c1", "while (true) {}"), chat_text(&["ok"])]);
    let env = code_env(&llm, &json!({"code_mode": {"cpu_ms": 100}}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "spin");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec timed out", 0);
    let exec_end = events(&frames, "activity")
        .into_iter()
        .rfind(|a| a["data"]["name"] == "exec")
        .unwrap();
    assert_eq!(exec_end["data"]["state"], "failed");
}

#[test]
fn cancel_stops_a_busy_cell_within_500_ms_and_shutdown_leaves_no_helper() {
    let llm = FakeLlm::start(vec![exec("c1", "while (true) {}")]);
    let env = code_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "spin");
    until_match(&mut s, is_event("activity"));
    let helper = the_helper(&s);
    let (frames, took) = cancel_turn(&mut s, &sid, &run_id);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "cancelled");
    assert!(took < Duration::from_millis(500), "{took:?}");
    // The helper outlives its cell (state is kept across cells) and dies with the child.
    assert!(alive(helper), "the helper is kept for the next cell");
    s.shutdown_ok("bye");
    assert!(!alive(helper), "code-host {helper} left after shutdown");
}

#[test]
fn a_killed_helper_fails_its_cell_and_the_next_exec_starts_another() {
    let llm = FakeLlm::start(vec![
        exec("c1", "while (true) {}"),
        chat_text(&["one"]),
        exec("c2", "return 7;"),
        chat_text(&["two"]),
    ]);
    let env = code_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "spin");
    until_match(&mut s, is_event("activity"));
    let helper = the_helper(&s);
    let killed = std::process::Command::new("kill")
        .args(["-9", &helper.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec failed", 0);
    start_turn(&mut s, &sid, "again");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c2");
    header_ok(&text, "exec completed", 0);
    assert!(text.ends_with("\n7"), "{text}");
    let again = the_helper(&s);
    assert_ne!(again, helper, "a new helper");
    s.shutdown_ok("bye");
    assert!(!alive(again));
}

#[test]
fn a_nested_call_that_asks_waits_for_its_approval_and_store_keeps_values_across_cells() {
    let write = "store(\"k\", {v: 41});\n\
                 return await tools.write_file({path: \"out.txt\", content: \"hi\"});";
    let llm = FakeLlm::start(vec![
        exec("c1", write),
        exec("c2", "return load(\"k\").v + 1;"),
        chat_text(&["ok"]),
    ]);
    let env = code_env(&llm, &json!({"code_mode": {"tools": {"write": "ask"}}}));
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "write");
    let (req, _) = until_match(&mut s, is_event("approval.requested"));
    let summary = req["data"]["summary"].as_str().unwrap();
    assert!(summary.starts_with("code: "), "{summary}");
    assert!(
        !env.cwd.join("out.txt").exists(),
        "nothing runs before the answer"
    );
    let approval_id = req["data"]["approval_id"].as_str().unwrap();
    s.request(
        "a1",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": approval_id, "allow": true}),
    );
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(
        std::fs::read_to_string(env.cwd.join("out.txt")).unwrap(),
        "hi"
    );
    drop(llm.next(WAIT));
    header_ok(&tool_result(&llm.next(WAIT), "c1"), "exec completed", 1);
    let second = tool_result(&llm.next(WAIT), "c2");
    header_ok(&second, "exec completed", 0);
    assert!(second.ends_with("\n42"), "{second}");
}

#[test]
fn a_cell_stops_at_timeout_ms_and_the_helper_inherits_no_secrets() {
    let llm = FakeLlm::start(vec![exec("c1", "while (true) {}"), chat_text(&["ok"])]);
    let mut env = code_env(&llm, &json!({"code_mode": {"timeout_ms": 1000}}));
    env.set_var("OPENAI_API_KEY", "sk-not-for-code");
    env.set_var("MY_SERVICE_TOKEN", "t");
    env.set_var("CODE_MODE_PLAIN", "kept");
    let (mut s, sid) = start_session(&env, &[]);
    let t0 = Instant::now();
    start_turn(&mut s, &sid, "spin");
    until_match(&mut s, is_event("activity"));
    let helper = the_helper(&s);
    let environ = std::fs::read(format!("/proc/{helper}/environ")).unwrap();
    let names: Vec<&[u8]> = environ
        .split(|b| *b == 0)
        .filter_map(|kv| kv.split(|b| *b == b'=').next())
        .collect();
    assert!(names.contains(&&b"CODE_MODE_PLAIN"[..]));
    assert!(!names.contains(&&b"OPENAI_API_KEY"[..]));
    assert!(!names.contains(&&b"MY_SERVICE_TOKEN"[..]));
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert!(t0.elapsed() >= Duration::from_millis(1000));
    drop(llm.next(WAIT));
    header_ok(&tool_result(&llm.next(WAIT), "c1"), "exec timed out", 0);
}

#[test]
fn a_pre_tool_hook_blocks_a_nested_call_and_runs_for_exec_too() {
    let code = "try { await tools.read_file({path: \"a.txt\"}); return \"ran\"; } \
                catch (e) { return [e.name, e.code]; }";
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["ok"])]);
    let env = code_env(
        &llm,
        &json!({"hooks": {"pre_tool": [
            {"command": "touch exec-hook-ran", "tools": ["exec"]},
            {"command": "exit 2", "tools": ["read_file"]},
        ]}}),
    );
    std::fs::write(env.cwd.join("a.txt"), "alpha\n").unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "read");
    until_finished(&mut s);
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec completed", 1);
    assert!(text.ends_with(r#"["ToolError","blocked"]"#), "{text}");
    assert!(env.cwd.join("exec-hook-ran").exists());
}

#[test]
fn replacing_the_session_kills_its_helper() {
    let llm = FakeLlm::start(vec![exec("c1", "return 1;"), chat_text(&["ok"])]);
    let env = code_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "once");
    until_finished(&mut s);
    let helper = the_helper(&s);
    let created = s.call("c2", "session.create", &json!({}));
    assert!(created["result"]["session_id"].is_string(), "{created}");
    assert!(!alive(helper), "code-host {helper} outlived its session");
    assert!(helpers(s.pid()).is_empty());
    s.shutdown_ok("bye");
}

#[test]
fn a_backend_killed_mid_cell_leaves_exec_on_disk_replayed_with_its_error_result() {
    // Child A stores exec's call before its cell runs, then dies (SIGKILL) in the cell; its
    // helper, whose stdin closes, goes too. Child B reopens the session and goes on.
    let llm = FakeLlm::start(vec![exec("c1", "while (true) {}")]);
    let env = code_env(&llm, &json!({}));
    let (mut a, sid) = start_session(&env, &[]);
    start_turn(&mut a, &sid, "spin");
    until_match(&mut a, is_event("activity"));
    let helper = the_helper(&a);
    let file = crate::common::sessions_dir(&env).join(format!("{sid}.jsonl"));
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(
        stored.contains("\"tool_call\"") && stored.contains("\"exec\""),
        "exec's call is stored before its cell runs: {stored}"
    );
    a.crash();
    let outlived = format!("code-host {helper} outlived its backend");
    crate::common::poll::until(WAIT, &outlived, || !alive(helper));

    let llm = FakeLlm::start(vec![chat_text(&["recovered"])]);
    env.use_fake_llm(&llm, &json!({"code_mode": {"enabled": true}}));
    let mut b = env.spawn();
    drop(b.call("init", "initialize", &crate::common::init_params(&[])));
    let open = b.call("o", "session.open", &json!({"session_id": sid}));
    assert_eq!(open["result"]["durable"], true, "{open}");
    start_turn(&mut b, &sid, "go on");
    let frames = until_finished(&mut b);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let req = llm.next(WAIT);
    let msgs = req.body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"],
        "{msgs:#?}"
    );
    assert_eq!(msgs[2]["tool_calls"][0]["function"]["name"], "exec");
    assert_eq!(msgs[3]["tool_call_id"], "c1");
    assert_eq!(msgs[3]["content"], "no result: the backend stopped");
    assert_eq!(msgs[5]["content"], "go on");
}

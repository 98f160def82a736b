//! Hooks and runaway loops over real pipes (`runner.md` 7): `pre_tool` hooks that block or
//! fail, a cancel killing a running hook's group (the 10 s bound itself is tested on a virtual
//! clock, `agent::hooks::tests`), the exact stdin a hook gets, `tools` filters, `post_tool` with `ok`, global-only hooks, and
//! the third equal call in a row refused with `repeated_tool_call`.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm};
use crate::common::{
    assert_error, diagnostic_codes, events, fake_llm_settings, init_params, last_tool_result,
    result, run_turn, start_session, start_turn, Env,
};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

const WAIT: Duration = crate::common::STEP;

/// Global settings selecting the configured Chat provider `local` at the fake server.
fn llm_settings(llm: &FakeLlm, tools: &Value, hooks: &Value) -> Value {
    fake_llm_settings(llm, &json!({"tools": tools, "hooks": hooks}))
}

/// Global settings selecting the scripted provider's `script` model on `steps` (one turn).
fn script_settings(env: &Env, steps: &Value, tools: &Value, hooks: &Value) -> Value {
    let script = env.root.join("script.json");
    std::fs::write(&script, json!({"turns": [{"steps": steps}]}).to_string()).unwrap();
    json!({
        "model": "script",
        "providers": {"scripted": {"script": script}},
        "tools": tools,
        "hooks": hooks,
    })
}

/// Scripts one allowed `write_file` of `out.txt` behind the one `pre_tool` hook `command`.
fn write_out_txt_behind_pre_tool(env: &Env, command: &str) {
    let steps = json!([
        {"tool": {"name": "write_file", "input": {"path": "out.txt", "content": "hi"}}},
        {"text": "done"},
    ]);
    env.write_global_settings(&script_settings(
        env,
        &steps,
        &json!({"write": "allow"}),
        &json!({"pre_tool": [{"command": command}]}),
    ));
}

/// Polls `done` every 20 ms until it holds, failing with `what` after `within`.
#[track_caller]
fn poll_until(within: Duration, what: &str, done: impl FnMut() -> bool) {
    crate::common::poll::until(within, what, done);
}

/// Polls until the process group whose ID a hook wrote to `pgid_file` is gone.
#[track_caller]
fn group_gone(pgid_file: &Path) {
    let pgid: i64 = std::fs::read_to_string(pgid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    poll_until(WAIT, "the hook's process group is alive", || {
        !std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("kill -0 -- -{pgid} 2>/dev/null"))
            .status()
            .unwrap()
            .success()
    });
}

/// `initialize` on a fresh child of `env`: the response frame.
fn init(env: &Env) -> Value {
    env.spawn()
        .call("init", "initialize", &init_params(&["status"]))
}

/// `(code, summary)` of every diagnostic.
fn diagnostics(frames: &[Value]) -> Vec<(String, String)> {
    events(frames, "diagnostic")
        .iter()
        .map(|f| {
            (
                f["data"]["code"].as_str().unwrap().to_owned(),
                f["data"]["summary"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The final state of each tool activity, in order.
fn final_states(frames: &[Value]) -> Vec<String> {
    events(frames, "activity")
        .iter()
        .map(|f| f["data"]["state"].as_str().unwrap().to_owned())
        .filter(|s| s != "started")
        .collect()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn a_pre_tool_hook_exiting_2_blocks_the_call_and_the_later_hooks() {
    let llm = FakeLlm::start(vec![
        chat_tool_call(
            "call_W",
            "write_file",
            r#"{"path":"out.txt","content":"secret"}"#,
        ),
        chat_text(&["ok"]),
    ]);
    let env = Env::new();
    env.write_global_settings(&llm_settings(
        &llm,
        &json!({"write": "allow"}),
        &json!({"pre_tool": [
            {"command": "cat > pre.json; exit 2"},
            {"command": "touch later-hook-ran"},
        ]}),
    ));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "go");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(final_states(&frames), ["failed"]);
    let acts = events(&frames, "activity");
    assert!(
        acts[1]["data"]["summary"]
            .as_str()
            .unwrap()
            .contains("blocked by a hook"),
        "{:?}",
        acts[1]
    );
    assert!(!env.cwd.join("out.txt").exists(), "the blocked call ran");
    assert!(
        !env.cwd.join("later-hook-ran").exists(),
        "a hook after the blocking one ran"
    );
    assert!(diagnostics(&frames).is_empty(), "{frames:#?}");
    // The hook got exactly the promised fields on stdin.
    assert_eq!(
        read_json(&env.cwd.join("pre.json")),
        json!({
            "event": "pre_tool",
            "tool": "write_file",
            "input": {"path": "out.txt", "content": "secret"},
            "session_id": sid,
        })
    );
    llm.next(WAIT);
    let second = llm.next(WAIT);
    assert_eq!(last_tool_result(&second.body).1, "blocked by a hook");
}

#[test]
fn failing_hooks_are_diagnostics_and_post_tool_hooks_get_ok_through_the_tools_filter() {
    let env = Env::new();
    let steps = json!([
        {"tool": {"name": "write_file", "input": {"path": "out.txt", "content": "hi"}}},
        {"tool": {"name": "read_file", "input": {"path": "missing.txt"}}},
        {"text": "done"},
    ]);
    env.write_global_settings(&script_settings(
        &env,
        &steps,
        &json!({"write": "allow"}),
        &json!({
            "pre_tool": [
                {"command": "echo loud; echo louder >&2; exit 1"},
                {"command": "exit 2", "tools": ["shell"]},
            ],
            "post_tool": [
                {"command": "cat >> post.jsonl; echo >> post.jsonl"},
                {"command": "cat > only-read.json", "tools": ["read_file"]},
                {"command": "exit 3", "tools": ["write_file"]},
            ],
        }),
    ));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "go");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    // The failing hook did not stop the write; the `shell`-only blocker applied to neither.
    assert_eq!(
        std::fs::read_to_string(env.cwd.join("out.txt")).unwrap(),
        "hi"
    );
    assert_eq!(final_states(&frames), ["completed", "failed"]);
    let pre = (
        "hook_failed".to_owned(),
        "a pre_tool hook failed (exit 1)".to_owned(),
    );
    let post = (
        "hook_failed".to_owned(),
        "a post_tool hook failed (exit 3)".to_owned(),
    );
    assert_eq!(diagnostics(&frames), [pre.clone(), post, pre]);
    // Hook output is never echoed.
    let text = serde_json::to_string(&frames).unwrap();
    assert!(!text.contains("loud"), "hook output reached the client");
    let lines: Vec<Value> = std::fs::read_to_string(env.cwd.join("post.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            json!({"event": "post_tool", "tool": "write_file",
                   "input": {"path": "out.txt", "content": "hi"}, "session_id": sid, "ok": true}),
            json!({"event": "post_tool", "tool": "read_file",
                   "input": {"path": "missing.txt"}, "session_id": sid, "ok": false}),
        ]
    );
    assert_eq!(
        read_json(&env.cwd.join("only-read.json"))["tool"],
        "read_file"
    );
}

#[test]
fn hooks_skip_calls_that_policy_refuses_and_post_hooks_skip_calls_that_did_not_run() {
    let env = Env::new();
    let steps = json!([
        {"tool": {"name": "shell", "input": {"command": "true"}}},
        {"text": "done"},
    ]);
    env.write_global_settings(&script_settings(
        &env,
        &steps,
        &json!({"shell": "deny"}),
        &json!({
            "pre_tool": [{"command": "touch pre-ran"}],
            "post_tool": [{"command": "touch post-ran"}],
        }),
    ));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "go");
    assert_eq!(final_states(&frames), ["failed"]);
    assert!(!env.cwd.join("pre-ran").exists());
    assert!(!env.cwd.join("post-ran").exists());
}

#[test]
fn cancelling_the_run_stops_a_running_hook() {
    let env = Env::new();
    write_out_txt_behind_pre_tool(&env, "echo $$ > pgid; touch started; sleep 30 & sleep 30");
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "go");
    poll_until(WAIT, "the hook never started", || {
        env.cwd.join("started").exists()
    });
    let sent = Instant::now();
    s.request(
        "cancel",
        "turn.cancel",
        &json!({"session_id": sid, "run_id": run_id}),
    );
    let mut seen = Vec::new();
    let fin = loop {
        let f = s.next();
        if f["event"] == "run.finished" {
            break f;
        }
        seen.push(f);
    };
    // Well before the 10 s bound would have stopped it, however loaded the machine.
    assert!(
        sent.elapsed() < Duration::from_secs(8),
        "{:?} {seen:#?}",
        sent.elapsed()
    );
    assert_eq!(fin["data"]["outcome"], "cancelled");
    group_gone(&env.cwd.join("pgid"));
    assert!(!env.cwd.join("out.txt").exists());
    assert!(
        diagnostics(&seen).is_empty(),
        "a cancelled hook is no failure"
    );
    assert_eq!(final_states(&seen), ["failed"]);
}

#[test]
fn hooks_in_project_settings_are_configuration_invalid() {
    let env = Env::new();
    env.write_project_settings(&json!({"hooks": {"pre_tool": [{"command": "true"}]}}));
    let f = init(&env);
    assert_error(&f, Some("init"), "configuration_invalid");
    // A malformed or oversized global definition too.
    let bad = [
        json!({"pre_tool": [{"command": "true", "when": "always"}]}),
        json!({"pre_tool": [{"command": "x".repeat(4097)}]}),
        json!({"post_tool": vec![json!({"command": "true"}); 17]}),
        json!({"pre_tool": [{"command": "true", "tools": "shell"}]}),
    ];
    for hooks in bad {
        let env = Env::new();
        env.write_global_settings(&json!({"hooks": hooks}));
        let f = init(&env);
        assert_error(&f, Some("init"), "configuration_invalid");
    }
    let env = Env::new();
    env.write_global_settings(&json!({"hooks": {
        "pre_tool": vec![json!({"command": "x".repeat(4096)}); 16],
        "post_tool": vec![json!({"command": "true", "tools": ["shell"]}); 16],
    }}));
    let f = init(&env);
    assert!(result(&f).is_object(), "{f}");
}

#[test]
fn the_third_equal_call_in_a_row_and_the_fourth_are_refused_as_repeats() {
    let args = r#"{"command":"echo x >> count.txt"}"#;
    let llm = FakeLlm::start(vec![
        chat_tool_call("c1", "shell", args),
        chat_tool_call("c2", "shell", args),
        chat_tool_call("c3", "shell", args),
        // Same value, other key order and spacing: still equal as JSON.
        chat_tool_call("c4", "shell", r#"{ "command" : "echo x >> count.txt" }"#),
        chat_text(&["stopped"]),
    ]);
    let env = Env::new();
    env.write_global_settings(&llm_settings(&llm, &json!({"shell": "allow"}), &json!({})));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "go");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(
        final_states(&frames),
        ["completed", "completed", "failed", "failed"]
    );
    assert_eq!(
        std::fs::read_to_string(env.cwd.join("count.txt")).unwrap(),
        "x\nx\n",
        "only the first two calls ran"
    );
    let codes = diagnostic_codes(&frames);
    assert_eq!(codes, ["repeated_tool_call", "repeated_tool_call"]);
    let seen: Vec<_> = (0..5).map(|_| llm.next(WAIT)).collect();
    assert!(!last_tool_result(&seen[2].body).1.contains("repeated"));
    for later in &seen[3..] {
        let r = last_tool_result(&later.body).1;
        assert!(r.contains("repeated the same tool call"), "{r}");
    }
}

#[test]
fn a_different_call_in_between_resets_the_row_and_refused_calls_count() {
    let env = Env::new();
    let a = json!({"tool": {"name": "shell", "input": {"command": "echo a >> a.txt"}}});
    let b = json!({"tool": {"name": "shell", "input": {"command": "echo b >> b.txt"}}});
    let nope = json!({"tool": {"name": "nope", "input": {}}});
    let steps = json!([a, a, b, a, a, nope, nope, nope, {"text": "done"}]);
    env.write_global_settings(&script_settings(
        &env,
        &steps,
        &json!({"shell": "allow"}),
        &json!({}),
    ));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "go");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(
        std::fs::read_to_string(env.cwd.join("a.txt")).unwrap(),
        "a\na\na\na\n"
    );
    let codes = diagnostic_codes(&frames);
    assert_eq!(codes, ["repeated_tool_call"], "only the third unknown call");
    let acts = events(&frames, "activity");
    let last = acts.last().unwrap()["data"]["summary"].as_str().unwrap();
    assert!(last.contains("repeated"), "{last}");
}

//! `claude-subscription` turns through the real binary and the real Claude Code CLI
//! (`backend.md` "Claude through the native CLI"), pinned in the npm fixtures, each with its
//! own `HOME` holding a Claude plan's sign-in, no API key, and `ANTHROPIC_BASE_URL` at a
//! loopback fake Messages server: the CLI runs its own loop, our tools are its `magi` server's,
//! answered through our policy and approvals.

use super::claude::{claude, env_with, signed_in};
use crate::common::anthropic_sse::{reply, stop, text, tool_use};
use crate::common::fake_llm::{FakeLlm, Reply};
use crate::common::{
    cancel_turn, diagnostic_codes, events, reconciled, result, start_session, start_turn,
    until_finished, Env,
};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;

/// A signed-in env on `claude-subscription/sonnet` whose CLI talks to `llm`, with tool
/// policies `tools`.
fn env_for(llm: &FakeLlm, tools: &Value) -> Env {
    let cli = claude();
    let mut env = env_with(&cli);
    env.write_global_settings(&json!({
        "provider": "claude-subscription", "model": "sonnet",
        "providers": {"claude-subscription": {"command": cli}},
        "tools": tools,
    }));
    signed_in(&env);
    env.set_var("ANTHROPIC_BASE_URL", &llm.base);
    env
}

/// The `text` of every `text` block of every user message of `body`, and of every
/// `tool_result` block, in order.
fn user_texts(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        if m["role"] != "user" {
            continue;
        }
        match &m["content"] {
            Value::String(s) => out.push(s.clone()),
            Value::Array(blocks) => {
                for b in blocks {
                    if let Some(t) = b["text"].as_str() {
                        out.push(t.to_owned());
                    }
                    if b["type"] == "tool_result" {
                        out.push(b["content"].to_string());
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// A text reply from the fake.
fn says(t: &str) -> Reply {
    reply(vec![text(0, t), stop("end_turn")])
}

/// The session CLI processes (by their executable and arguments) whose environment names
/// `MC_HOME` `home`.
fn clis_of(home: &std::path::Path) -> usize {
    processes(home, true)
}

/// The CLI processes (by their executable) whose environment names `MC_HOME` `home`; only
/// sessions' CLIs with `sessions`, else titles' one-shot processes too.
fn processes(home: &std::path::Path, sessions: bool) -> usize {
    let mark = format!("MC_HOME={}", home.display());
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            let p = e.path();
            let exe = std::fs::read_link(p.join("exe")).unwrap_or_default();
            let env = std::fs::read(p.join("environ")).unwrap_or_default();
            let args = std::fs::read(p.join("cmdline")).unwrap_or_default();
            // A session's CLI, not a title's one-shot process.
            let session = args.split(|b| *b == 0).any(|a| a == b"--input-format");
            exe.to_string_lossy().contains("claude")
                && (session || !sessions)
                && env.split(|b| *b == 0).any(|kv| kv == mark.as_bytes())
        })
        .count()
}

#[test]
fn a_text_turn_streams_and_reconciles_and_the_next_turn_uses_the_same_cli() {
    let llm = FakeLlm::start(vec![says("hello from the plan"), says("second answer")]);
    let mut env = env_for(&llm, &json!({}));
    // A key in the backend's environment never reaches the CLI (it would bill the key).
    env.set_var("ANTHROPIC_API_KEY", "sk-ant-api03-must-not-pass");
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "say hello");
    let frames = until_finished(&mut s);
    assert_eq!(
        frames.last().unwrap()["data"]["outcome"],
        "completed",
        "{frames:#?}"
    );
    assert_eq!(reconciled(&frames), "hello from the plan");
    assert!(!events(&frames, "message.delta").is_empty());
    let first = llm.next(WAIT);
    assert!(first.path.starts_with("/v1/messages"), "{}", first.path);
    assert!(user_texts(&first.body).iter().any(|t| t == "say hello"));
    // Signed in with the plan: the CLI sends its OAuth token, never an API key.
    assert!(first.headers.iter().all(|(k, _)| k != "x-api-key"));
    let bearer = first.headers.iter().find(|(k, _)| k == "authorization");
    assert!(
        bearer.is_some_and(|(_, v)| v.contains("sk-ant-oat01-magi-test")),
        "{:?}",
        first.headers
    );
    assert_eq!(clis_of(std::path::Path::new(&env.mc_home)), 1);

    start_turn(&mut s, &sid, "again");
    let frames = until_finished(&mut s);
    assert_eq!(reconciled(&frames), "second answer");
    let second = llm.next(WAIT);
    // The same conversation: the first turn is in the CLI's own request.
    let said = user_texts(&second.body);
    assert!(said.iter().any(|t| t == "say hello") && said.iter().any(|t| t == "again"));
    assert_eq!(
        clis_of(std::path::Path::new(&env.mc_home)),
        1,
        "one CLI per session"
    );
    let stored = crate::common::session_records(&env, &sid);
    let items: Vec<&Value> = stored
        .iter()
        .filter(|r| r["type"] == "provider_item")
        .collect();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["provider"], "claude-subscription");
    assert_eq!(items[0]["item"]["type"], "claude_cli_session");
    assert_eq!(items[0]["item"]["uuid"], items[1]["item"]["uuid"]);
    assert!(stored.iter().any(|r| r["type"] == "usage"));
    s.shutdown_ok("bye");
    // Neither the session's CLI nor a title's one-shot process outlives the backend.
    let home = std::path::Path::new(&env.mc_home);
    assert_eq!(processes(home, false), 0, "no CLI after shutdown");
}

#[test]
fn a_tool_call_goes_through_our_approval_and_its_result_reaches_the_model() {
    for allow in [true, false] {
        let call = tool_use(
            1,
            "toolu_magi_1",
            "mcp__magi__write_file",
            r#"{"path":"w.txt","content":"from the plan\n"}"#,
        );
        let llm = FakeLlm::start(vec![
            reply(vec![text(0, "Writing it."), call, stop("tool_use")]),
            says("done"),
        ]);
        let env = env_for(&llm, &json!({"write": "ask"}));
        let (mut s, sid) = start_session(&env, &["approval.answer"]);
        let run_id = start_turn(&mut s, &sid, "write w.txt");
        let mut frames = crate::common::answer_next_approval(&mut s, &sid, &run_id, allow);
        let asked = frames.last().unwrap().clone();
        let summary = asked["data"]["summary"].as_str().unwrap();
        assert!(summary.starts_with("write_file w.txt"), "{asked}");
        frames.extend(until_finished(&mut s));
        assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
        assert_eq!(env.cwd.join("w.txt").exists(), allow);
        // Two segments: the text before the call, then the answer, each reconciled.
        let done: Vec<&Value> = events(&frames, "message.reconcile");
        let texts: Vec<(&str, &str)> = done
            .iter()
            .map(|f| {
                let d = &f["data"];
                (
                    d["message_id"].as_str().unwrap(),
                    d["text"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert_eq!((texts[0].1, texts[1].1), ("Writing it.", "done"));
        assert_ne!(texts[0].0, texts[1].0);
        let acts: Vec<&Value> = events(&frames, "activity");
        assert!(
            acts.iter().all(|a| a["data"]["name"] == "write_file"),
            "{acts:#?}"
        );

        let _ = llm.next(WAIT);
        let second = llm.next(WAIT);
        let results = user_texts(&second.body);
        let last = results.last().unwrap();
        if allow {
            assert!(!last.contains("denied"), "{last}");
        } else {
            assert!(last.contains("denied by the user"), "{last}");
        }
        let stored = crate::common::session_records(&env, &sid);
        let call = stored.iter().find(|r| r["type"] == "tool_call").unwrap();
        assert_eq!(
            (&call["call_id"], &call["name"]),
            (&json!("toolu_magi_1"), &json!("write_file"))
        );
        let res = stored.iter().find(|r| r["type"] == "tool_result").unwrap();
        assert_eq!(res["call_id"], "toolu_magi_1");
        assert_eq!(res["is_error"], !allow);
        s.shutdown_ok("bye");
    }
}

#[test]
fn turn_cancel_interrupts_the_cli_within_500_ms_and_the_next_turn_works() {
    let llm = FakeLlm::start(vec![says("never").stalled(), says("after the cancel")]);
    let env = env_for(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "take long");
    assert!(llm.stalled_within(WAIT));
    let (frames, took) = cancel_turn(&mut s, &sid, &run_id);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "cancelled");
    assert!(took < Duration::from_millis(500), "{took:?}");
    start_turn(&mut s, &sid, "next");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(reconciled(&frames), "after the cancel");
    assert_eq!(clis_of(std::path::Path::new(&env.mc_home)), 1);
    s.shutdown_ok("bye");
}

#[test]
fn a_401_fails_the_turn_with_provider_auth_and_says_to_log_in() {
    let denied = json!({"type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
    let llm = FakeLlm::start(vec![Reply::status(401, &denied); 8]);
    let env = env_for(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "hi");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "failed");
    let codes = diagnostic_codes(&frames);
    assert_eq!(
        codes.last().map(String::as_str),
        Some("provider_auth"),
        "{codes:?}"
    );
    let said = events(&frames, "diagnostic");
    assert!(said.iter().any(|d| d["data"]["summary"]
        .as_str()
        .unwrap()
        .contains("claude auth login")));
    // The provider's error text is never shown.
    assert!(!reconciled(&frames).contains("invalid x-api-key"));
    s.shutdown_ok("bye");
}

/// The `uuid` of each `claude_cli_session` item stored in session `sid`.
fn conversations(env: &Env, sid: &str) -> Vec<String> {
    crate::common::session_records(env, sid)
        .iter()
        .filter(|r| r["type"] == "provider_item" && r["item"]["type"] == "claude_cli_session")
        .map(|r| r["item"]["uuid"].as_str().unwrap().to_owned())
        .collect()
}

/// Runs a turn of `prompt` in session `sid` on a new backend of `env` (after `session.open`).
fn turn_after_restart(env: &Env, sid: &str, prompt: &str) -> Vec<Value> {
    let mut s = env.spawn();
    let _ = s.call("init", "initialize", &crate::common::init_params(&[]));
    let open = s.call("o", "session.open", &json!({"session_id": sid}));
    assert_eq!(result(&open)["durable"], true, "{open}");
    start_turn(&mut s, sid, prompt);
    let frames = until_finished(&mut s);
    s.shutdown_ok("bye");
    frames
}

#[test]
fn a_new_backend_resumes_the_cli_conversation_or_starts_one_from_the_transcript() {
    let llm = FakeLlm::start(vec![says("one"), says("two"), says("three")]);
    let env = env_for(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "first prompt");
    assert_eq!(reconciled(&until_finished(&mut s)), "one");
    s.shutdown_ok("bye");
    let _ = llm.next(WAIT);

    // `--resume`: the CLI's own conversation goes on.
    let frames = turn_after_restart(&env, &sid, "second prompt");
    assert_eq!(reconciled(&frames), "two");
    let said = user_texts(&llm.next(WAIT).body);
    assert!(said.iter().any(|t| t == "first prompt"), "{said:?}");
    let uuids = conversations(&env, &sid);
    assert_eq!(uuids.len(), 2);
    assert_eq!(uuids[0], uuids[1]);

    // The CLI lost its conversation: a new one starts from our transcript.
    std::fs::remove_dir_all(env.root.join(".claude/projects")).unwrap();
    let frames = turn_after_restart(&env, &sid, "third prompt");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(reconciled(&frames), "three");
    let said = user_texts(&llm.next(WAIT).body);
    let first = said.iter().find(|t| t.contains("third prompt")).unwrap();
    for earlier in [
        "[user]\nfirst prompt",
        "[assistant]\none",
        "[user]\nsecond prompt",
    ] {
        assert!(first.contains(earlier), "{first}");
    }
    let uuids = conversations(&env, &sid);
    assert_eq!(uuids.len(), 3);
    assert_ne!(uuids[2], uuids[1]);
}

#[test]
fn the_title_comes_from_a_one_shot_cli_on_haiku() {
    let llm = FakeLlm::with_titles(vec![says("hello")], vec![says("Greeting The Plan")]);
    let env = env_for(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "say hello");
    assert_eq!(reconciled(&until_finished(&mut s)), "hello");
    let asked = llm.next_title(WAIT).expect("no title request");
    assert!(
        asked.body["model"].as_str().unwrap().contains("haiku"),
        "{}",
        asked.body["model"]
    );
    assert!(asked.body["tools"].as_array().is_none_or(Vec::is_empty));
    let title = crate::common::poll::within(WAIT, || {
        crate::common::session_records(&env, &sid)
            .iter()
            .find(|r| r["type"] == "title")
            .map(|r| r["title"].as_str().unwrap().to_owned())
    });
    assert_eq!(title.as_deref(), Some("Greeting The Plan"));
    s.shutdown_ok("bye");
}

#[test]
fn the_clis_retries_are_said_as_ours_are() {
    let busy = json!({"type": "error", "error": {"type": "api_error", "message": "boom"}});
    let llm = FakeLlm::start(vec![Reply::status(500, &busy), says("after a retry")]);
    let env = env_for(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "hi");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(reconciled(&frames), "after a retry");
    let retried = events(&frames, "diagnostic");
    assert_eq!(retried.len(), 1, "{retried:#?}");
    assert_eq!(retried[0]["data"]["code"], "provider_retry");
    assert!(retried[0]["data"]["summary"]
        .as_str()
        .unwrap()
        .contains("(retry 1 of "));
    s.shutdown_ok("bye");
}

#[test]
fn the_clis_own_compaction_is_a_compaction_activity() {
    let llm = FakeLlm::start(vec![says("hello"), says("The user said hi."), says("ok")]);
    let env = env_for(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "hi");
    assert_eq!(reconciled(&until_finished(&mut s)), "hello");
    // The CLI's own command: it summarizes its conversation and says so.
    start_turn(&mut s, &sid, "/compact");
    let frames = until_finished(&mut s);
    assert_eq!(
        frames.last().unwrap()["data"]["outcome"],
        "completed",
        "{frames:#?}"
    );
    let acts: Vec<(&str, &str)> = events(&frames, "activity")
        .iter()
        .map(|a| {
            (
                a["data"]["kind"].as_str().unwrap(),
                a["data"]["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        acts,
        [("compaction", "started"), ("compaction", "completed")],
        "{frames:#?}"
    );
    // The CLI keeps its summary: no compaction record of ours.
    assert!(crate::common::session_records(&env, &sid)
        .iter()
        .all(|r| r["type"] != "compaction"));
    s.shutdown_ok("bye");
}

#[test]
fn a_changed_model_restarts_the_cli_with_resume() {
    let llm = FakeLlm::start(vec![says("on sonnet"), says("on opus")]);
    let env = env_for(&llm, &json!({}));
    env.write_global_settings(&json!({
        "provider": "claude-subscription", "model": "sonnet",
        "providers": {"claude-subscription": {"command": claude()},
            "catalog": {"enabled": ["claude-subscription/sonnet", "claude-subscription/opus"]}},
    }));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "first prompt");
    assert_eq!(reconciled(&until_finished(&mut s)), "on sonnet");
    let first = llm.next(WAIT);
    assert!(first.body["model"].as_str().unwrap().contains("sonnet"));
    let sel = result(&s.call("st", "status", &json!({})))["selection"]["revision"].clone();
    let cat = result(&s.call("cat", "model.catalog", &json!({})))["revision"].clone();
    let set = s.call(
        "set",
        "selection.set",
        &json!({"session_id": sid, "selection_revision": sel, "catalog_revision": cat,
            "provider": "claude-subscription", "model": "opus"}),
    );
    assert!(set.get("error").is_none(), "{set}");
    start_turn(&mut s, &sid, "second prompt");
    assert_eq!(reconciled(&until_finished(&mut s)), "on opus");
    let second = llm.next(WAIT);
    assert!(
        second.body["model"].as_str().unwrap().contains("opus"),
        "{}",
        second.body["model"]
    );
    let said = user_texts(&second.body);
    assert!(said.iter().any(|t| t == "first prompt"), "{said:?}");
    let uuids = conversations(&env, &sid);
    assert_eq!((uuids.len(), &uuids[0]), (2, &uuids[1]));
    assert_eq!(clis_of(std::path::Path::new(&env.mc_home)), 1);
    s.shutdown_ok("bye");
}

/// A fake CLI at `env.root/claude`, signed in by its `auth status`, that logs its arguments to
/// `env.root/args` and then runs `body` (bash) for a session.
fn fake_cli(env: &Env, body: &str) -> std::path::PathBuf {
    let path = env.root.join("claude");
    let log = env.root.join("args");
    let script = format!(
        "#!/bin/bash\nif [ \"$1\" = auth ]; then echo '{{\"loggedIn\":true,\"authMethod\":\"claude.ai\"}}'; exit 0; fi\n\
         echo \"$*\" >> '{}'\n{body}\n",
        log.display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// Answers the `initialize` control request (bash).
const ANSWER_INIT: &str = r#"read -r line
id=$(echo "$line" | sed 's/.*"request_id":"\([^"]*\)".*/\1/')
echo "{\"type\":\"control_response\",\"response\":{\"subtype\":\"success\",\"request_id\":\"$id\",\"response\":{}}}""#;

#[test]
fn a_cli_that_breaks_off_fails_the_turn_and_the_next_turn_resumes_in_a_new_one() {
    for (body, resumes) in [
        // A line that is not JSON before the handshake: no conversation to resume.
        (
            "read -r line\necho 'this is not json'\nsleep 5".to_owned(),
            false,
        ),
        // Exits after the input, before its result.
        (format!("{ANSWER_INIT}\nread -r line\nexit 0"), true),
    ] {
        let llm = FakeLlm::start(Vec::new());
        let env = env_for(&llm, &json!({}));
        let cli = fake_cli(&env, &body);
        env.write_global_settings(&json!({
            "provider": "claude-subscription", "model": "sonnet",
            "providers": {"claude-subscription": {"command": cli}},
        }));
        let (mut s, sid) = start_session(&env, &[]);
        for prompt in ["one", "two"] {
            start_turn(&mut s, &sid, prompt);
            let frames = until_finished(&mut s);
            assert_eq!(frames.last().unwrap()["data"]["outcome"], "failed");
            assert_eq!(
                diagnostic_codes(&frames),
                ["provider_stream_invalid"],
                "{frames:#?}"
            );
        }
        let args = std::fs::read_to_string(env.root.join("args")).unwrap();
        let runs: Vec<&str> = args.lines().collect();
        assert!(runs[0].contains("--session-id "), "{args}");
        assert_eq!(runs[1].contains("--resume "), resumes, "{args}");
        s.shutdown_ok("bye");
    }
}

#[test]
fn code_mode_is_offered_and_its_cell_runs_for_the_cli() {
    let call = tool_use(
        1,
        "toolu_exec_1",
        "mcp__magi__exec",
        r#"{"code":"return 6 * 7"}"#,
    );
    let llm = FakeLlm::start(vec![
        reply(vec![text(0, "Computing."), call, stop("tool_use")]),
        says("it is 42"),
    ]);
    let env = env_for(&llm, &json!({}));
    env.write_global_settings(&json!({
        "provider": "claude-subscription", "model": "sonnet", "code_mode": {"enabled": true},
        "providers": {"claude-subscription": {"command": claude()}},
    }));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "compute");
    let frames = until_finished(&mut s);
    assert_eq!(
        frames.last().unwrap()["data"]["outcome"],
        "completed",
        "{frames:#?}"
    );
    let first = llm.next(WAIT);
    let offered: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(offered.contains(&"mcp__magi__exec"), "{offered:?}");
    let results = user_texts(&llm.next(WAIT).body);
    assert!(results.last().unwrap().contains("42"), "{results:?}");
    let stored = crate::common::session_records(&env, &sid);
    let call = stored.iter().find(|r| r["type"] == "tool_call").unwrap();
    assert_eq!(
        (&call["name"], &call["call_id"]),
        (&json!("exec"), &json!("toolu_exec_1"))
    );
    s.shutdown_ok("bye");
}

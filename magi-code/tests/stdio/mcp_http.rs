//! MCP servers over Streamable HTTP against a loopback fake (`backend.md` "MCP servers over
//! HTTP", `decisions.md` 41–42): JSON and SSE answers, `202` for notifications, the session id
//! and revision on every later request, a lost session initialized again once, `401`s, a
//! stream cut mid-answer, `DELETE` at teardown, a slow handshake cancelled by shutdown, and
//! header values and tokens kept out of frames, files and stderr.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm};
use crate::common::fake_mcp::{FakeMcp, Faults};
use crate::common::{assert_error, events, init_params, start_turn, Env};
use crate::mcp::{finished, mcp_settings, ready_in, script_env, session, until, WAIT};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// One turn calling `mcp__web__echo` with `texts` in order against `def`; its frames.
fn turn(def: &Value, texts: &[&str], vars: &[(&str, &str)]) -> Vec<Value> {
    let mut steps: Vec<Value> = texts
        .iter()
        .map(|t| json!({"tool": {"name": "mcp__web__echo", "input": {"text": t}}}))
        .collect();
    steps.push(json!({"text": "done"}));
    let mut env = script_env(
        &json!(steps),
        &[("web", def)],
        Some(json!({"mcp": "allow"})),
    );
    for (k, v) in vars {
        env.set_var(k, v);
    }
    let (mut s, _) = ready_in(&env);
    let sid = session(&mut s);
    start_turn(&mut s, &sid, "go");
    let frames = until(&mut s, finished);
    s.shutdown_ok("bye");
    frames
}

/// The final states and summaries of a turn's activities.
fn finals(frames: &[Value]) -> Vec<(String, String)> {
    events(frames, "activity")
        .iter()
        .filter(|a| a["data"]["state"] != "started")
        .map(|a| {
            let d = &a["data"];
            (
                d["state"].as_str().unwrap().into(),
                d["summary"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn m(list: &[(&str, u16)]) -> Vec<(String, u16)> {
    list.iter().map(|(a, b)| ((*a).to_owned(), *b)).collect()
}

const OK_CALL: (&str, &str) = ("completed", "mcp__web__echo (text): ok");

#[test]
fn json_and_sse_answers_reach_the_model_with_the_session_headers_and_a_delete_at_teardown() {
    for sse in [false, true] {
        let fake = FakeMcp::start(Faults {
            sse,
            ..Faults::default()
        });
        let def = json!({"url": fake.url});
        let llm = FakeLlm::start(vec![
            chat_tool_call("c1", "mcp__web__echo", r#"{"text":"hi"}"#),
            chat_text(&["ok"]),
        ]);
        let env = Env::new();
        let settings =
            json!({"tools": {"mcp": "allow"}, "mcp": mcp_settings(&[("web", &def)], true)});
        env.use_fake_llm(&llm, &settings);
        let (mut s, _) = ready_in(&env);
        let sid = session(&mut s);
        start_turn(&mut s, &sid, "go");
        let frames = until(&mut s, finished);
        assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
        llm.next(WAIT);
        let second = llm.next(WAIT);
        let last = second.body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["content"], "echo: hi", "sse {sse}");
        s.shutdown_ok("bye");
        assert_eq!(
            fake.methods(),
            m(&[
                ("initialize", 200),
                ("notifications/initialized", 202),
                ("tools/list", 200),
                ("tools/call", 200),
                ("DELETE", 200)
            ]),
            "sse {sse}"
        );
        let seen = fake.seen();
        // The answers to the fake's pings come on their own time (checked below).
        let ordered = seen.iter().filter(|r| r.rpc() != "response");
        for (i, r) in ordered.enumerate() {
            let h = |k: &str| r.headers.get(k).map(String::as_str);
            if r.method == "POST" {
                assert_eq!(h("accept"), Some("application/json, text/event-stream"));
                assert_eq!(h("content-type"), Some("application/json"));
            }
            let (sid, version) = if i == 0 {
                (None, None)
            } else {
                (Some("s1"), Some("2025-06-18"))
            };
            assert_eq!(h("mcp-session-id"), sid, "{} sse {sse}", r.rpc());
            assert_eq!(h("mcp-protocol-version"), version, "{} sse {sse}", r.rpc());
        }
        if sse {
            // The fake's ping on each stream got its answer, POSTed with the session id.
            eventually(|| fake.seen().iter().any(|r| r.rpc() == "response"));
            let pong = fake
                .seen()
                .into_iter()
                .find(|r| r.rpc() == "response")
                .unwrap();
            assert_eq!(
                pong.body,
                json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}})
            );
        }
    }
}

#[test]
fn a_lost_session_is_initialized_again_once_and_the_request_retried_once() {
    let fake = FakeMcp::start(Faults {
        lose_session_once: true,
        ..Faults::default()
    });
    let frames = turn(&json!({"url": fake.url}), &["a", "b"], &[]);
    assert_eq!(
        finals(&frames),
        [OK_CALL, OK_CALL].map(|(a, b)| (a.into(), b.into()))
    );
    assert_eq!(
        fake.methods(),
        m(&[
            ("initialize", 200),
            ("notifications/initialized", 202),
            ("tools/list", 200),
            ("tools/call", 404),
            ("initialize", 200),
            ("notifications/initialized", 202),
            ("tools/call", 200),
            ("tools/call", 200),
            ("DELETE", 200)
        ])
    );
    let seen = fake.seen();
    let sids: Vec<Option<&str>> = seen
        .iter()
        .filter(|r| r.rpc() != "response")
        .map(|r| r.headers.get("mcp-session-id").map(String::as_str))
        .collect();
    let (s1, s2) = (Some("s1"), Some("s2"));
    assert_eq!(sids, [None, s1, s1, s1, None, s2, s2, s2, s2]);

    // A server that loses every session: one new session and one retry, then the call fails.
    let fake = FakeMcp::start(Faults {
        lose_session_always: true,
        ..Faults::default()
    });
    let frames = turn(&json!({"url": fake.url}), &["a"], &[]);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(
        finals(&frames),
        [(
            "failed".to_owned(),
            "mcp__web__echo (text): error".to_owned()
        )]
    );
    assert_eq!(
        fake.methods(),
        m(&[
            ("initialize", 200),
            ("notifications/initialized", 202),
            ("tools/list", 200),
            ("tools/call", 404),
            ("initialize", 200),
            ("notifications/initialized", 202),
            ("tools/call", 404),
            // The session id it gave last is still this side's: teardown ends it.
            ("DELETE", 200),
        ])
    );
}

#[test]
fn a_stream_cut_mid_answer_fails_that_call_and_the_next_call_works() {
    let fake = FakeMcp::start(Faults {
        sse: true,
        break_first_call: true,
        ..Faults::default()
    });
    let frames = turn(&json!({"url": fake.url}), &["a", "b"], &[]);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(
        finals(&frames),
        [
            (
                "failed".to_owned(),
                "mcp__web__echo (text): error".to_owned()
            ),
            (OK_CALL.0.into(), OK_CALL.1.into())
        ]
    );
    // Not a lost server: no diagnostic, the same session serves the next call.
    assert!(events(&frames, "diagnostic")
        .iter()
        .all(|d| d["data"]["code"] != "mcp_server_failed"));
    let calls: Vec<_> = fake
        .seen()
        .into_iter()
        .filter(|r| r.rpc() == "tools/call")
        .collect();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c.headers["mcp-session-id"] == "s1"));
}

/// Initialization of an env with `def` approved (or not) and `vars` set answers
/// `mcp_unavailable`.
fn unavailable(def: &Value, approve: bool, vars: &[(&str, &str)]) {
    let mut env = Env::new();
    env.write_global_settings(&json!({"mcp": mcp_settings(&[("web", def)], approve)}));
    for (k, v) in vars {
        env.set_var(k, v);
    }
    let mut s = env.spawn();
    let f = s.call("init", "initialize", &init_params(&["status", "shutdown"]));
    assert_error(&f, Some("init"), "mcp_unavailable");
    s.shutdown_ok("bye");
}

#[test]
fn a_401_to_a_static_bearer_an_unset_variable_or_no_approval_is_mcp_unavailable() {
    // A static bearer cannot refresh: one 401, no retry.
    let fake = FakeMcp::start(Faults {
        always_401: true,
        ..Faults::default()
    });
    let def = json!({"url": fake.url, "bearer_token_env": "MCP_TEST_BEARER"});
    unavailable(&def, true, &[("MCP_TEST_BEARER", "tok-401")]);
    assert_eq!(fake.methods(), m(&[("initialize", 401)]));
    assert_eq!(fake.seen()[0].headers["authorization"], "Bearer tok-401");
    // Nothing is sent when a named variable is unset, or when the server is not approved
    // (decision 41), whatever the server would answer.
    let fake = FakeMcp::start(Faults::default());
    unavailable(
        &json!({"url": fake.url, "bearer_token_env": "MCP_TEST_UNSET_1"}),
        true,
        &[],
    );
    unavailable(
        &json!({"url": fake.url, "env_headers": {"X-Key": "MCP_TEST_UNSET_2"}}),
        true,
        &[],
    );
    unavailable(&json!({"url": fake.url}), false, &[]);
    unavailable(&json!({"url": fake.url, "oauth": {}}), true, &[]);
    assert_eq!(fake.methods(), m(&[]));
}

#[test]
fn a_401_mid_session_fails_the_call_with_mcp_auth_required() {
    let fake = FakeMcp::start(Faults {
        calls_401: true,
        ..Faults::default()
    });
    let frames = turn(&json!({"url": fake.url}), &["a"], &[]);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(
        finals(&frames),
        [(
            "failed".to_owned(),
            "mcp__web__echo (text): auth required".to_owned()
        )]
    );
    let diags = events(&frames, "diagnostic");
    assert!(
        diags
            .iter()
            .any(|d| d["data"]["code"] == "mcp_auth_required"),
        "{diags:?}"
    );
}

#[test]
fn shutdown_cancels_a_silent_http_handshake_within_the_cleanup_bound() {
    let fake = FakeMcp::start(Faults {
        silent_initialize: true,
        ..Faults::default()
    });
    let env = Env::new();
    env.write_global_settings(
        &json!({"mcp": mcp_settings(&[("web", &json!({"url": fake.url}))], true)}),
    );
    let mut s = env.spawn();
    s.request("init", "initialize", &init_params(&["status", "shutdown"]));
    // Shutdown comes once the handshake is held by the server, whatever the machine's load.
    assert!(eventually(|| fake
        .seen()
        .iter()
        .any(|r| r.rpc() == "initialize")));
    let t0 = Instant::now();
    s.request("bye", "shutdown", &json!({}));
    let code = s.exit_code_within(Duration::from_secs(5));
    let took = t0.elapsed();
    assert_eq!(code, 0);
    assert!(took < Duration::from_millis(2_500), "{took:?}");
}

#[test]
fn header_values_and_tokens_reach_the_server_and_nothing_else() {
    let (bearer, fixed, from_env) = (
        "tok-7f3a9c-SECRET",
        "hdr-51be0d-SECRET",
        "env-9d2e44-SECRET",
    );
    let fake = FakeMcp::start(Faults {
        sse: true,
        ..Faults::default()
    });
    let def = json!({"url": fake.url, "bearer_token_env": "MCP_TEST_BEARER",
                     "headers": {"X-Static": fixed}, "env_headers": {"X-Env": "MCP_TEST_ENV_HEADER"}});
    let mut env = script_env(
        &json!([{"tool": {"name": "mcp__web__echo", "input": {"text": "hi"}}}, {"text": "done"}]),
        &[("web", &def)],
        Some(json!({"mcp": "allow"})),
    );
    env.set_var("MCP_TEST_BEARER", bearer);
    env.set_var("MCP_TEST_ENV_HEADER", from_env);
    let mut s = env.spawn();
    s.request("init", "initialize", &init_params(&["status", "shutdown"]));
    let mut frames = until(&mut s, |f| f["id"] == "init");
    let sid = session(&mut s);
    start_turn(&mut s, &sid, "go");
    frames.extend(until(&mut s, finished));
    s.request("bye", "shutdown", &json!({}));
    frames.extend(s.frames_until_eof());
    let stderr = s.stderr();
    assert_eq!(finals(&frames), [(OK_CALL.0.into(), OK_CALL.1.into())]);
    let seen = fake.seen();
    assert!(seen.len() >= 5);
    for r in &seen {
        assert_eq!(
            r.headers["authorization"],
            format!("Bearer {bearer}"),
            "{}",
            r.rpc()
        );
        assert_eq!(r.headers["x-static"], fixed);
        assert_eq!(r.headers["x-env"], from_env);
    }
    let text: String = frames.iter().map(Value::to_string).collect();
    let stderr = String::from_utf8_lossy(&stderr);
    for secret in [bearer, fixed, from_env] {
        assert!(!text.contains(secret), "{secret} in a frame");
        assert!(!stderr.contains(secret), "{secret} on stderr");
    }
    // Every file the child wrote (sessions, history, caches); the settings file is the user's.
    for path in files(&env.root) {
        if path
            .file_name()
            .is_some_and(|n| n == "settings.json" || n == "script.json")
        {
            continue;
        }
        let bytes = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        for secret in [bearer, fixed, from_env] {
            assert!(!bytes.contains(secret), "{secret} in {}", path.display());
        }
    }
}

/// Every file under `dir`.
fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Polls `check` until it holds or [`WAIT`] passes.
fn eventually(check: impl Fn() -> bool) -> bool {
    crate::common::poll::within(WAIT, || check().then_some(())).is_some()
}

#[test]
fn a_cancelled_call_sends_notifications_cancelled_and_drops_its_stream() {
    let fake = FakeMcp::start(Faults {
        stall_calls: true,
        ..Faults::default()
    });
    let env = script_env(
        &json!([{"tool": {"name": "mcp__web__echo", "input": {"text": "slow"}}}]),
        &[("web", &json!({"url": fake.url}))],
        Some(json!({"mcp": "allow"})),
    );
    let (mut s, _) = ready_in(&env);
    let sid = session(&mut s);
    let run_id = start_turn(&mut s, &sid, "go");
    until(&mut s, |f| {
        f["event"] == "activity" && f["data"]["state"] == "started"
    });
    assert!(eventually(|| fake
        .seen()
        .iter()
        .any(|r| r.rpc() == "tools/call")));
    let t0 = Instant::now();
    s.request(
        "x",
        "turn.cancel",
        &json!({"session_id": sid, "run_id": run_id}),
    );
    let frames = until(&mut s, finished);
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "cancelled");
    assert!(eventually(|| fake
        .seen()
        .iter()
        .any(|r| r.rpc() == "notifications/cancelled")));
    assert!(eventually(|| fake.dropped() == 1), "the stream was dropped");
    let seen = fake.seen();
    let call = seen.iter().find(|r| r.rpc() == "tools/call").unwrap();
    let note = seen
        .iter()
        .find(|r| r.rpc() == "notifications/cancelled")
        .unwrap();
    assert_eq!(note.body["params"]["requestId"], call.body["id"]);
    assert_eq!(note.headers["mcp-session-id"], "s1");
    s.shutdown_ok("bye");
}

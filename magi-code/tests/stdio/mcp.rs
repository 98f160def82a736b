//! MCP servers over real pipes (`backend.md` "MCP servers"): approval by the global digest,
//! parallel start, tools reaching the model, the `mcp` policy, faults of a misbehaving fake
//! server, and teardown within the cleanup wait. The real servers come from
//! `tests/fixtures/mcp`, which the tests install themselves (`common::npm`); a missing node or
//! a failed install fails them.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm};
use crate::common::npm::ensure_npm;
use crate::common::poll;
pub(crate) use crate::common::procs::alive;
use crate::common::procs::{bytes_read, children};
use crate::common::{
    assert_error, events, history_kinds, init_params, last_message, result, start_turn, Env, Server,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub(crate) const WAIT: Duration = crate::common::STEP;

pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp")
}

pub(crate) fn fake(mode: &str) -> Value {
    json!({"command": "python3", "args": [fixtures().join("fake_server.py"), mode]})
}

pub(crate) fn fake_with_pidfile(mode: &str, pidfile: &Path) -> Value {
    json!({"command": "python3", "args": [fixtures().join("fake_server.py"), mode, pidfile]})
}

/// The real server `pkg` (`server-filesystem`, `server-everything`) with `args`, its package
/// installed from the pinned lockfile first if missing or stale (a failed install fails).
pub(crate) fn real(pkg: &str, args: &[&str]) -> Value {
    let entry = format!("node_modules/@modelcontextprotocol/{pkg}/dist/index.js");
    let entry = ensure_npm(&fixtures(), &entry);
    let mut a = vec![json!(entry)];
    a.extend(args.iter().map(|x| json!(x)));
    json!({"command": "node", "args": a})
}

/// The approval digest of server `name` defined as `def` (its canonical definition).
pub(crate) fn digest(name: &str, def: &Value) -> String {
    let mut canon = def.clone();
    canon.as_object_mut().unwrap().remove("enabled");
    canon["name"] = json!(name);
    // serde_json's map is ordered by key: this is the canonical compact form.
    let bytes = serde_json::to_string(&canon).unwrap();
    Sha256::digest(bytes.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `mcp` settings enabling every server, approving those of `approve`.
pub(crate) fn mcp_settings(servers: &[(&str, &Value)], approve: bool) -> Value {
    let mut defs = serde_json::Map::new();
    let mut approved = Vec::new();
    for (name, def) in servers {
        let mut d = (*def).clone();
        d["enabled"] = json!(true);
        defs.insert((*name).to_owned(), d);
        if approve {
            approved.push(digest(name, def));
        }
    }
    json!({"servers": defs, "approved": approved})
}

pub(crate) fn script_env(steps: &Value, servers: &[(&str, &Value)], tools: Option<Value>) -> Env {
    let env = Env::new();
    let script = env.root.join("script.json");
    std::fs::write(&script, json!({"turns": [{"steps": steps}]}).to_string()).unwrap();
    let mut settings = json!({
        "model": "script", "providers": {"scripted": {"script": script}},
        "mcp": mcp_settings(servers, true),
    });
    if let Some(t) = tools {
        settings["tools"] = t;
    }
    env.write_global_settings(&settings);
    env
}

/// Sends `initialize` and waits up to `within` for its answer; the answer and how long it took.
fn init_within(s: &mut Server, within: Duration) -> (Value, Duration) {
    let t0 = Instant::now();
    s.request("init", "initialize", &init_params(&["status", "shutdown"]));
    loop {
        let f = s.next_within(within);
        if f["id"] == "init" {
            return (f, t0.elapsed());
        }
    }
}

pub(crate) fn ready_in(env: &Env) -> (Server, Duration) {
    let mut s = env.spawn();
    let (f, took) = init_within(&mut s, WAIT);
    assert!(f.get("result").is_some(), "not ready: {f}");
    (s, took)
}

fn fails_with_mcp_unavailable(env: &Env) -> Duration {
    let mut s = env.spawn();
    let (f, took) = init_within(&mut s, WAIT);
    assert_error(&f, Some("init"), "mcp_unavailable");
    s.shutdown_ok("bye");
    took
}

pub(crate) fn session(s: &mut Server) -> String {
    result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Frames up to and including the first matching `pred`.
pub(crate) fn until(s: &mut Server, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let f = s.next_within(WAIT);
        let stop = pred(&f);
        seen.push(f);
        if stop {
            return seen;
        }
    }
}

pub(crate) fn finished(f: &Value) -> bool {
    f["event"] == "run.finished"
}

/// Waits until the MCP servers under `backend` have read more than `before` bytes: the
/// call's request reached one, so what follows finds it mid-operation.
#[track_caller]
fn reached_a_server(backend: u32, before: u64) {
    poll::until(WAIT, "the call never reached a server", || {
        bytes_read(&children(backend)) > before
    });
}

// ---------------------------------------------------------------------------------------------
// Approval.

#[test]
fn an_unapproved_server_is_mcp_unavailable_and_never_started() {
    let env = Env::new();
    let pidfile = env.root.join("fake.pid");
    let def = fake_with_pidfile("ok", &pidfile);
    env.write_global_settings(&json!({"mcp": mcp_settings(&[("fake", &def)], false)}));
    fails_with_mcp_unavailable(&env);
    assert!(
        !pidfile.exists(),
        "an unapproved server must not be spawned"
    );
}

#[test]
fn a_project_approval_approves_nothing() {
    let env = Env::new();
    let pidfile = env.root.join("fake.pid");
    let def = fake_with_pidfile("ok", &pidfile);
    // The project defines, enables and "approves" it; only global approval counts.
    env.write_project_settings(&json!({"mcp": mcp_settings(&[("fake", &def)], true)}));
    fails_with_mcp_unavailable(&env);
    assert!(!pidfile.exists());
    // The same digest in global settings approves the project's definition.
    env.write_global_settings(&json!({"mcp": {"approved": [digest("fake", &def)]}}));
    let (mut s, _) = ready_in(&env);
    s.shutdown_ok("bye");
}

#[test]
fn a_disabled_server_needs_no_approval_and_is_not_started() {
    let env = Env::new();
    let pidfile = env.root.join("fake.pid");
    let def = fake_with_pidfile("ok", &pidfile);
    env.write_global_settings(&json!({"mcp": {"servers": {"fake": def}}}));
    let (mut s, _) = ready_in(&env);
    s.shutdown_ok("bye");
    assert!(!pidfile.exists());
}

// ---------------------------------------------------------------------------------------------
// Faults at startup.

#[test]
fn garbage_lines_up_to_the_bound_are_tolerated_and_one_more_fails_startup() {
    let env = Env::new();
    let def = fake("garbage:16");
    env.write_global_settings(&json!({"mcp": mcp_settings(&[("fake", &def)], true)}));
    let (mut s, _) = ready_in(&env);
    s.shutdown_ok("bye");

    let env = Env::new();
    let def = fake("garbage:17");
    env.write_global_settings(&json!({"mcp": mcp_settings(&[("fake", &def)], true)}));
    fails_with_mcp_unavailable(&env);
}

#[test]
fn a_line_over_one_mib_a_foreign_protocol_version_or_a_missing_program_fail_startup() {
    for def in [
        fake("huge"),
        fake("badversion"),
        json!({"command": "/nonexistent/mcp-server"}),
    ] {
        let env = Env::new();
        env.write_global_settings(&json!({"mcp": mcp_settings(&[("fake", &def)], true)}));
        let took = fails_with_mcp_unavailable(&env);
        assert!(took < Duration::from_secs(5), "{def}: {took:?}");
    }
}

#[test]
fn a_server_silent_on_initialize_is_torn_down_when_startup_fails() {
    // The silent server is up and waiting on its handshake when the other fails it (it starts
    // only once the silent one wrote its pidfile): startup is `mcp_unavailable` without waiting
    // for the 10 s handshake bound, and no server is left. The bound itself is a deadline
    // given as data: `mcp::tests::a_handshake_past_its_deadline_fails_startup_and_leaves_no_process`
    // and, on virtual instants, `mcp::jsonrpc::tests::deadlines_are_data_and_expire_at_their_instant`.
    let env = Env::new();
    let pidfile = env.root.join("fake.pid");
    let hang = fake_with_pidfile("hang", &pidfile);
    let bad = json!({"command": "sh", "args": ["-c", format!(
        "while [ ! -e {p} ]; do sleep 0.01; done; exec python3 {} badversion",
        fixtures().join("fake_server.py").display(),
        p = pidfile.display(),
    )]});
    env.write_global_settings(
        &json!({"mcp": mcp_settings(&[("bad", &bad), ("hang", &hang)], true)}),
    );
    let mut s = env.spawn();
    let (f, took) = init_within(&mut s, WAIT);
    assert_error(&f, Some("init"), "mcp_unavailable");
    // Not the 10 s bound: the failure of the other server ended the wait.
    assert!(took < Duration::from_secs(10), "{took:?}");
    let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().parse().unwrap();
    assert!(!alive(pid), "the hung server was torn down");
    assert!(children(s.pid()).iter().all(|c| !alive(*c)));
    s.shutdown_ok("bye");
}

#[test]
fn shutdown_during_a_hung_handshake_stops_within_the_cleanup_bound() {
    let env = Env::new();
    let pidfile = env.root.join("fake.pid");
    let hang = fake_with_pidfile("hang", &pidfile);
    env.write_global_settings(&json!({"mcp": mcp_settings(&[("hang", &hang)], true)}));
    let mut s = env.spawn();
    s.request("init", "initialize", &init_params(&["status", "shutdown"]));
    poll::within(WAIT, || pidfile.exists().then_some(()));
    let t0 = Instant::now();
    s.request("bye", "shutdown", &json!({}));
    let code = s.exit_code_within(Duration::from_secs(5));
    let took = t0.elapsed();
    assert_eq!(code, 0);
    assert!(took < Duration::from_millis(2_500), "{took:?}");
    let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().parse().unwrap();
    assert!(!alive(pid));
}

#[test]
fn servers_start_in_parallel() {
    // A rendezvous, not a stopwatch: each fake answers `initialize` only once the other one
    // has started too. One after the other, the first would wait for the second until the
    // 10 s handshake bound made startup `mcp_unavailable`; in parallel both get ready.
    let env = Env::new();
    let script = fixtures().join("fake_server.py");
    let marks = env.root.join("marks");
    std::fs::create_dir(&marks).unwrap();
    let meeting = |me: &str, other: &str| {
        json!({"command": "sh", "args": ["-c", format!(
            "touch {m}/{me}; while [ ! -e {m}/{other} ]; do sleep 0.01; done; exec python3 {} ok",
            script.display(),
            m = marks.display(),
        )]})
    };
    env.write_global_settings(&json!({"mcp": mcp_settings(
        &[("a", &meeting("a", "b")), ("b", &meeting("b", "a"))],
        true
    )}));
    let (mut s, took) = ready_in(&env);
    eprintln!("two fake servers that wait for each other ready in {took:?}");
    s.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------------
// Calls through the fake server.

#[test]
fn fake_tools_reach_the_model_and_their_results_come_back() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("c1", "mcp__fake__echo", r#"{"text":"hi"}"#),
        chat_tool_call("c2", "mcp__fake__fail", "{}"),
        chat_text(&["ok"]),
    ]);
    let env = Env::new();
    let def = fake("ok");
    env.use_fake_llm(
        &llm,
        &json!({
            "tools": {"mcp": "allow"},
            "mcp": mcp_settings(&[("fake", &def)], true),
        }),
    );
    let (mut s, _) = ready_in(&env);
    let sid = session(&mut s);
    start_turn(&mut s, &sid, "go");
    let frames = until(&mut s, finished);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");

    let first = llm.next(WAIT);
    let tools = first.body["tools"].as_array().unwrap();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    // Both pages of tools/list; `bad.name` is not a valid offered name and is left out.
    for n in ["mcp__fake__echo", "mcp__fake__die", "mcp__fake__fail"] {
        assert!(names.contains(&n), "{names:?}");
    }
    assert!(!names.iter().any(|n| n.contains("bad")), "{names:?}");
    assert!(names.contains(&"read_file"));
    let echo = tools
        .iter()
        .find(|t| t["function"]["name"] == "mcp__fake__echo")
        .unwrap();
    assert_eq!(echo["function"]["description"], "Echoes its text.");
    assert_eq!(
        echo["function"]["parameters"]["properties"]["text"]["type"],
        "string"
    );

    let second = llm.next(WAIT);
    let msgs = second.body["messages"].as_array().unwrap();
    let last = msgs.last().unwrap();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["content"], "echo: hi\n[image content omitted]");
    let third = llm.next(WAIT);
    let last = last_message(&third.body);
    assert!(
        last["content"].as_str().unwrap().contains("it failed"),
        "{last}"
    );

    let acts = events(&frames, "activity");
    let states: Vec<(&str, &str)> = acts
        .iter()
        .map(|a| {
            (
                a["data"]["name"].as_str().unwrap(),
                a["data"]["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("mcp__fake__echo", "started"),
            ("mcp__fake__echo", "completed"),
            ("mcp__fake__fail", "started"),
            ("mcp__fake__fail", "failed"),
        ]
    );
    s.shutdown_ok("bye");
}

#[test]
fn the_mcp_policy_defaults_to_ask() {
    let def = fake("ok");
    let env = script_env(
        &json!([{"tool": {"name": "mcp__fake__echo", "input": {"text": "x"}}}, {"text": "done"}]),
        &[("fake", &def)],
        None,
    );
    let (mut s, _) = ready_in(&env);
    let sid = session(&mut s);
    let run_id = start_turn(&mut s, &sid, "go");
    let seen = until(&mut s, |f| f["event"] == "approval.requested");
    let req = seen.last().unwrap();
    // The tool and its argument names, never the arguments' values (no raw params).
    assert_eq!(req["data"]["summary"], "mcp__fake__echo (text)");
    let started = seen.iter().find(|f| f["event"] == "activity").unwrap();
    assert_eq!(started["data"]["summary"], "mcp__fake__echo (text)");
    let approval_id = req["data"]["approval_id"].as_str().unwrap().to_owned();
    s.request(
        "a1",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": approval_id, "allow": true}),
    );
    let frames = until(&mut s, finished);
    let done = events(&frames, "activity");
    assert_eq!(done.last().unwrap()["data"]["state"], "completed");
    assert_eq!(done.last().unwrap()["data"]["name"], "mcp__fake__echo");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");

    // `deny` refuses without asking.
    let env = script_env(
        &json!([{"tool": {"name": "mcp__fake__echo", "input": {}}}, {"text": "done"}]),
        &[("fake", &def)],
        Some(json!({"mcp": "deny"})),
    );
    let (mut s, _) = ready_in(&env);
    let sid = session(&mut s);
    start_turn(&mut s, &sid, "go");
    let frames = until(&mut s, finished);
    assert!(events(&frames, "approval.requested").is_empty());
    assert_eq!(
        events(&frames, "activity").last().unwrap()["data"]["state"],
        "failed"
    );
    s.shutdown_ok("bye");
}

#[test]
fn a_server_exiting_mid_call_fails_that_call_and_later_ones_and_the_run_goes_on() {
    let def = fake("ok");
    let env = script_env(
        &json!([
            {"tool": {"name": "mcp__fake__die", "input": {}}},
            {"tool": {"name": "mcp__fake__echo", "input": {"text": "later"}}},
            {"text": "still here"},
        ]),
        &[("fake", &def)],
        Some(json!({"mcp": "allow"})),
    );
    let (mut s, _) = ready_in(&env);
    let sid = session(&mut s);
    start_turn(&mut s, &sid, "go");
    let frames = until(&mut s, finished);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    // `bad.name` is left out: the first run says so (`mcp_tools_left_out`), apart from this.
    let diags: Vec<&Value> = events(&frames, "diagnostic")
        .into_iter()
        .filter(|d| d["data"]["code"] != "mcp_tools_left_out")
        .collect();
    assert!(
        !diags.is_empty()
            && diags
                .iter()
                .all(|d| d["data"]["code"] == "mcp_server_exited"),
        "{diags:?}"
    );
    let finals: Vec<&str> = events(&frames, "activity")
        .iter()
        .filter(|a| a["data"]["state"] != "started")
        .map(|a| a["data"]["state"].as_str().unwrap())
        .collect();
    assert_eq!(finals, ["failed", "failed"]);
    s.shutdown_ok("bye");
}

#[test]
fn cancelling_a_turn_mid_call_sends_notifications_cancelled_and_returns_at_once() {
    let env = Env::new();
    let pidfile = env.root.join("fake.pid");
    let def = fake_with_pidfile("ok", &pidfile);
    let script = env.root.join("script.json");
    std::fs::write(
        &script,
        json!({"turns": [{"steps": [{"tool": {"name": "mcp__fake__hang", "input": {}}}]}]})
            .to_string(),
    )
    .unwrap();
    env.write_global_settings(&json!({
        "model": "script", "providers": {"scripted": {"script": script}},
        "tools": {"mcp": "allow"},
        "mcp": mcp_settings(&[("fake", &def)], true),
    }));
    let (mut s, _) = ready_in(&env);
    let sid = session(&mut s);
    let run_id = start_turn(&mut s, &sid, "go");
    until(&mut s, |f| {
        f["event"] == "activity" && f["data"]["state"] == "started"
    });
    // The call has reached the server (real-pipe polling, bounded).
    let called = pidfile.with_extension("pid.called");
    poll::until(WAIT, "the call never reached the server", || {
        called.exists()
    });
    let t0 = Instant::now();
    s.request(
        "x",
        "turn.cancel",
        &json!({"session_id": sid, "run_id": run_id}),
    );
    let frames = until(&mut s, finished);
    let took = t0.elapsed();
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "cancelled");
    assert!(took < Duration::from_secs(1), "{took:?}");
    let log = pidfile.with_extension("pid.cancelled");
    poll::within(Duration::from_secs(5), || log.exists().then_some(()));
    // Requests 1 and 2 were initialize and tools/list, 3 the second page: the call is 4.
    assert_eq!(std::fs::read_to_string(&log).unwrap().trim(), "4 cancelled");
    s.shutdown_ok("bye");
}

#[test]
fn teardown_of_a_server_ignoring_eof_and_sigterm_ends_within_the_cleanup_wait() {
    let env = Env::new();
    let pidfile = env.root.join("fake.pid");
    let def = fake_with_pidfile("noeof", &pidfile);
    env.write_global_settings(&json!({"mcp": mcp_settings(&[("stubborn", &def)], true)}));
    let (mut s, _) = ready_in(&env);
    let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().parse().unwrap();
    assert!(alive(pid));
    let t0 = Instant::now();
    s.request("bye", "shutdown", &json!({}));
    let code = s.exit_code_within(Duration::from_secs(5));
    let took = t0.elapsed();
    eprintln!("teardown with a server ignoring EOF and SIGTERM: {took:?}");
    assert_eq!(code, 0);
    assert!(took < Duration::from_millis(2_500), "{took:?}");
    assert!(!alive(pid), "no server outlives the child");
}

// ---------------------------------------------------------------------------------------------
// Real servers from npm.

#[test]
fn the_filesystem_server_reads_a_file_for_the_model() {
    let env = Env::new();
    let root = env.cwd.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("note.txt"), "the MCP note\n").unwrap();
    let root = std::fs::canonicalize(&root).unwrap();
    let fs = real("server-filesystem", &[root.to_str().unwrap()]);
    let path = root.join("note.txt");
    let llm = FakeLlm::start(vec![
        chat_tool_call(
            "c1",
            "mcp__fs__read_text_file",
            &json!({ "path": path }).to_string(),
        ),
        chat_text(&["read it"]),
    ]);
    env.use_fake_llm(
        &llm,
        &json!({
            "tools": {"mcp": "allow"},
            "mcp": mcp_settings(&[("fs", &fs)], true),
        }),
    );
    let (mut s, took) = ready_in(&env);
    eprintln!("filesystem server ready in {took:?}");
    let sid = session(&mut s);
    start_turn(&mut s, &sid, "go");
    let frames = until(&mut s, finished);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let first = llm.next(WAIT);
    let names: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"mcp__fs__read_text_file"), "{names:?}");
    let second = llm.next(WAIT);
    let last = last_message(&second.body);
    assert_eq!(last["role"], "tool");
    assert!(
        last["content"].as_str().unwrap().contains("the MCP note"),
        "{last}"
    );
    let acts = events(&frames, "activity");
    assert_eq!(
        acts.last().unwrap()["data"]["name"],
        "mcp__fs__read_text_file"
    );
    assert_eq!(acts.last().unwrap()["data"]["state"], "completed");
    let rev = frames.last().unwrap()["data"]["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    let kinds = history_kinds(&mut s, "p", &sid, &rev);
    assert_eq!(kinds, ["user", "activity", "assistant"]);
    s.shutdown_ok("bye");
}

#[test]
fn two_real_servers_start_in_parallel_and_tear_down_within_the_bound() {
    let env = Env::new();
    let root = std::fs::canonicalize(&env.cwd).unwrap();
    let fs = real("server-filesystem", &[root.to_str().unwrap()]);
    let every = real("server-everything", &["stdio"]);
    // Each alone, then both together.
    let mut alone = Vec::new();
    for (name, def) in [("fs", &fs), ("everything", &every)] {
        let e = Env::new();
        e.write_global_settings(&json!({"mcp": mcp_settings(&[(name, def)], true)}));
        let (mut s, took) = ready_in(&e);
        alone.push(took);
        s.shutdown_ok("bye");
    }
    env.write_global_settings(&json!({
        "model": "script",
        "providers": {"scripted": {"script": env.root.join("script.json")}},
        "tools": {"mcp": "allow"},
        "mcp": mcp_settings(&[("fs", &fs), ("everything", &every)], true),
    }));
    std::fs::write(
        env.root.join("script.json"),
        json!({"turns": [{"steps": [
            {"tool": {"name": "mcp__everything__trigger-long-running-operation",
                      "input": {"duration": 30, "steps": 30}}},
        ]}]})
        .to_string(),
    )
    .unwrap();
    let (mut s, both) = ready_in(&env);
    eprintln!(
        "ready: filesystem alone {:?}, everything alone {:?}, both together {both:?}",
        alone[0], alone[1]
    );
    // `servers_start_in_parallel` proves the overlap deterministically; node's start is
    // CPU-bound, so on a loaded 2-core machine these figures are for the docs, not a comparison.
    assert!(both < Duration::from_secs(10), "{both:?}");

    // A long operation is running when shutdown comes: teardown still ends in the bound.
    let sid = session(&mut s);
    let before = bytes_read(&children(s.pid()));
    start_turn(&mut s, &sid, "go");
    until(&mut s, |f| {
        f["event"] == "activity" && f["data"]["state"] == "started"
    });
    reached_a_server(s.pid(), before);
    let servers: Vec<u32> = children(s.pid());
    assert!(servers.len() >= 2, "{servers:?}");
    let t0 = Instant::now();
    s.request("bye", "shutdown", &json!({}));
    let code = s.exit_code_within(Duration::from_secs(5));
    let took = t0.elapsed();
    eprintln!("teardown with server-everything mid-operation: {took:?}");
    assert_eq!(code, 0);
    assert!(took < Duration::from_millis(2_500), "{took:?}");
    for pid in servers {
        assert!(!alive(pid), "server {pid} outlived the child");
    }
}

#[test]
fn a_real_server_call_is_cancelled_and_the_server_serves_the_next_turn() {
    let every = real("server-everything", &["stdio"]);
    let env = Env::new();
    let script = env.root.join("script.json");
    std::fs::write(
        &script,
        json!({"turns": [
            {"steps": [{"tool": {"name": "mcp__everything__trigger-long-running-operation",
                                 "input": {"duration": 30, "steps": 30}}}]},
            {"steps": [{"tool": {"name": "mcp__everything__echo", "input": {"message": "still here"}}},
                       {"text": "done"}]},
        ]})
        .to_string(),
    )
    .unwrap();
    env.write_global_settings(&json!({
        "model": "script", "providers": {"scripted": {"script": script}},
        "tools": {"mcp": "allow"},
        "mcp": mcp_settings(&[("everything", &every)], true),
    }));
    let (mut s, _) = ready_in(&env);
    let sid = session(&mut s);
    let before = bytes_read(&children(s.pid()));
    let run_id = start_turn(&mut s, &sid, "go");
    until(&mut s, |f| {
        f["event"] == "activity" && f["data"]["state"] == "started"
    });
    reached_a_server(s.pid(), before);
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
    let acts = events(&frames, "activity");
    assert_eq!(acts.last().unwrap()["data"]["state"], "failed");
    // The server survived the cancellation and answers the next turn's call.
    start_turn(&mut s, &sid, "again");
    let frames = until(&mut s, finished);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let acts = events(&frames, "activity");
    let done = acts.last().unwrap();
    assert_eq!(done["data"]["state"], "completed", "{done}");
    assert_eq!(done["data"]["name"], "mcp__everything__echo");
    s.shutdown_ok("bye");
}

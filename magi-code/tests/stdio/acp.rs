//! `magi-code acp` (issue 30): the pinned ACP SDK's client drives it through a whole
//! conversation and a reload (`tests/fixtures/acp/acp.test.mjs`), and every line either way
//! validates against the SDK package's `schema/v1/schema.json`; bad messages get the
//! JSON-RPC errors the schema names; a prompt is refused past 16,384 bytes, never cut; a
//! backend child never outlives the adapter.

use crate::common::npm::ensure_npm;
use crate::common::poll::within;
use crate::common::procs::{alive, children};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_magi-code");
const WAIT: Duration = Duration::from_secs(30);

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp")
}

/// The SDK's v1 schema, compiled: the whole message, and each method's params and result
/// by the `$defs` entry whose `x-method` names it.
struct Schema {
    schemas: boon::Schemas,
    root: boon::SchemaIndex,
    /// (method, "Request" | "Notification" | "Response") → compiled `$defs` entry.
    defs: std::collections::HashMap<(String, &'static str), boon::SchemaIndex>,
    error: boon::SchemaIndex,
}

fn schema() -> &'static Schema {
    static V: std::sync::OnceLock<Schema> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let path = ensure_npm(
            &fixture(),
            "node_modules/@agentclientprotocol/sdk/schema/v1/schema.json",
        );
        let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let mut schemas = boon::Schemas::new();
        let mut c = boon::Compiler::new();
        let url = "https://agentclientprotocol.com/schema/v1/schema.json";
        c.add_resource(url, doc.clone()).unwrap();
        let root = c.compile(url, &mut schemas).unwrap();
        let mut defs = std::collections::HashMap::new();
        for (name, def) in doc["$defs"].as_object().unwrap() {
            let Some(method) = def["x-method"].as_str() else {
                continue;
            };
            let kinds = ["Request", "Notification", "Response"];
            let Some(kind) = kinds.into_iter().find(|k| name.ends_with(k)) else {
                continue;
            };
            let at = format!("{url}#/$defs/{name}");
            defs.insert(
                (method.to_owned(), kind),
                c.compile(&at, &mut schemas).unwrap(),
            );
        }
        let error = c
            .compile(&format!("{url}#/$defs/Error"), &mut schemas)
            .unwrap();
        Schema {
            schemas,
            root,
            defs,
            error,
        }
    })
}

/// Checks messages as they pass one way or the other, pairing each response with the
/// method of the request it answers.
#[derive(Default)]
struct Checker {
    /// Requests sent by the agent ([0]) and by the editor ([1]), by ID.
    asked: [std::collections::HashMap<String, String>; 2],
}

impl Checker {
    /// Panics unless `line` (sent by the editor when `from_editor`) is a v1 message whose
    /// params or result is its method's.
    #[track_caller]
    fn check(&mut self, line: &str, from_editor: bool) {
        let s = schema();
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let fail = |what: &str, e: &dyn std::fmt::Display| -> ! {
            panic!("not an ACP v1 {what} ({e}):\n{line}")
        };
        if let Err(e) = s.schemas.validate(&v, s.root) {
            fail("message", &e);
        }
        let side = usize::from(from_editor);
        let id = v.get("id").map(Value::to_string);
        if let Some(method) = v["method"].as_str() {
            let kind = if id.is_some() {
                "Request"
            } else {
                "Notification"
            };
            let Some(def) = s.defs.get(&(method.to_owned(), kind)) else {
                panic!("no v1 {kind} {method}:\n{line}")
            };
            if let Err(e) = s.schemas.validate(&v["params"], *def) {
                fail(method, &e);
            }
            if let Some(id) = id {
                self.asked[side].insert(id, method.to_owned());
            }
            return;
        }
        if let Some(e) = v.get("error") {
            if let Err(err) = s.schemas.validate(e, s.error) {
                fail("error", &err);
            }
            return;
        }
        // A result answers a request of the other side.
        let Some(method) = id.and_then(|id| self.asked[1 - side].remove(&id)) else {
            panic!("a result to no request:\n{line}")
        };
        let def = s.defs[&(method.clone(), "Response")];
        if let Err(e) = s.schemas.validate(&v["result"], def) {
            fail(&format!("{method} result"), &e);
        }
    }
}

#[test]
fn the_schema_check_refuses_what_v1_does_not_allow() {
    let refused = |line: Value| {
        let mut c = Checker::default();
        let prompt = json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
            "params": {"sessionId": "s", "prompt": []}});
        c.check(&prompt.to_string(), true);
        let line = line.to_string();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.check(&line, false);
        }));
        assert!(caught.is_err(), "accepted: {line}");
    };
    refused(json!({"jsonrpc": "2.0", "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "no_such_update"}}}));
    refused(json!({"jsonrpc": "2.0", "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "t"}}}));
    refused(json!({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "bogus"}}));
    refused(json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}));
    refused(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}}));
    refused(json!({"id": 1, "result": {}}));
}

/// An adapter on pipes, its stdout lines read on a thread of their own.
struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    checker: Checker,
    _home: tempfile::TempDir,
    cwd: tempfile::TempDir,
}

impl Acp {
    fn start() -> Self {
        Self::start_with(None)
    }

    /// An adapter whose `MC_HOME` settings play the script of `script` turns.
    fn start_with(script: Option<Value>) -> Self {
        Self::start_with_settings(script, json!({}))
    }

    /// [`Acp::start_with`], with `extra` settings merged in.
    fn start_with_settings(script: Option<Value>, extra: Value) -> Self {
        let home = tempfile::tempdir().unwrap();
        if let Some(turns) = script {
            let mc = home.path().join("mc");
            std::fs::create_dir_all(&mc).unwrap();
            let path = home.path().join("script.json");
            std::fs::write(&path, json!({ "turns": turns }).to_string()).unwrap();
            let mut settings =
                json!({"model": "script", "providers": {"scripted": {"script": path}}});
            for (k, v) in extra.as_object().unwrap() {
                settings[k] = v.clone();
            }
            std::fs::write(mc.join("settings.json"), settings.to_string()).unwrap();
        }
        let cwd = tempfile::tempdir().unwrap();
        let mut child = Command::new(EXE)
            .arg("acp")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("MC_HOME", home.path().join("mc"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
            checker: Checker::default(),
            _home: home,
            cwd,
        }
    }

    fn send(&mut self, line: &str) {
        // What the tests send is often wrong on purpose: only its method is kept, to check
        // the result that answers it.
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            if let (Some(id), Some(m)) = (v.get("id"), v["method"].as_str()) {
                self.checker.asked[1].insert(id.to_string(), m.to_owned());
            }
        }
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&msg.to_string());
        self.answer(&json!(id))
    }

    /// The next line, validated.
    fn next(&mut self) -> Value {
        let l = self
            .lines
            .recv_timeout(WAIT)
            .expect("a line from the adapter");
        self.checker.check(&l, false);
        serde_json::from_str(&l).unwrap()
    }

    /// The response to `id`, notifications before it skipped.
    fn answer(&mut self, id: &Value) -> Value {
        loop {
            let v = self.next();
            if v.get("method").is_none() && v["id"] == *id {
                return v;
            }
        }
    }

    fn initialize(&mut self) {
        let r = self.call(0, "initialize", json!({"protocolVersion": 1}));
        assert_eq!(r["result"]["protocolVersion"], 1, "{r}");
    }

    fn new_session(&mut self) -> String {
        let cwd = self.cwd.path().to_str().unwrap().to_owned();
        let r = self.call(1, "session/new", json!({"cwd": cwd, "mcpServers": []}));
        r["result"]["sessionId"].as_str().unwrap().to_owned()
    }

    /// Closes stdin and waits for the exit code.
    fn end(mut self) -> i32 {
        drop(self.stdin.take());
        let status = within(WAIT, || self.child.try_wait().unwrap()).expect("the adapter exits");
        status.code().unwrap_or(-1)
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn error_code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {v}"))
}

#[test]
fn the_sdk_client_drives_a_conversation_and_every_message_validates() {
    ensure_npm(
        &fixture(),
        "node_modules/@agentclientprotocol/sdk/package.json",
    );
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("transcript.jsonl");
    let out = Command::new("node")
        .args(["--test", "--test-timeout=120000", "acp.test.mjs"])
        .current_dir(fixture())
        .env("MAGI_CODE_BIN", EXE)
        .env("ACP_TRANSCRIPT", &transcript)
        .output()
        .unwrap_or_else(|e| panic!("cannot run node ({e}): the ACP test needs it"));
    assert!(
        out.status.success(),
        "acp.test.mjs failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&transcript).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    // Two adapters, one after the other: a fresh checker for each (IDs start again).
    let mut checker = Checker::default();
    for l in text.lines() {
        let entry: Value = serde_json::from_str(l).unwrap();
        let line = entry["line"].as_str().unwrap();
        if line.contains(r#""method":"initialize""#) {
            checker = Checker::default();
        }
        checker.check(line, entry["dir"] == "in");
        let m: Value = serde_json::from_str(line).unwrap();
        let what = m["method"].as_str().map_or("response", |_| "call");
        let update = m["params"]["update"]["sessionUpdate"]
            .as_str()
            .unwrap_or_default();
        seen.insert(format!(
            "{} {} {what} {update}",
            entry["dir"].as_str().unwrap(),
            m["method"].as_str().unwrap_or("")
        ));
    }
    // Both ways, every kind the conversation makes.
    for want in [
        "in initialize call ",
        "in session/new call ",
        "in session/prompt call ",
        "in session/cancel call ",
        "in session/load call ",
        "in  response ",
        "out  response ",
        "out session/request_permission call ",
        "out session/update call agent_message_chunk",
        "out session/update call user_message_chunk",
        "out session/update call tool_call",
        "out session/update call tool_call_update",
    ] {
        assert!(seen.contains(want), "no `{want}` in {seen:#?}");
    }
}

#[test]
fn bad_messages_get_the_errors_the_schema_names() {
    let mut a = Acp::start();
    // Before initialize, a request is refused; unreadable lines are parse errors (id null).
    let r = a.call(7, "session/new", json!({"cwd": "/", "mcpServers": []}));
    assert_eq!(error_code(&r), -32600);
    a.send("{this is not json");
    let r = a.next();
    assert_eq!((error_code(&r), &r["id"]), (-32700, &Value::Null));
    a.send(r#"{"id": 8, "method": "initialize", "params": {"protocolVersion": 1}}"#);
    let r = a.answer(&json!(8));
    assert_eq!(error_code(&r), -32600, "no jsonrpc member");
    a.initialize();
    let r = a.call(9, "initialize", json!({"protocolVersion": 1}));
    assert_eq!(error_code(&r), -32600, "a second initialize");
    let r = a.call(10, "no/such/method", json!({}));
    assert_eq!(error_code(&r), -32601);
    let r = a.call(
        11,
        "session/new",
        json!({"cwd": "relative/path", "mcpServers": []}),
    );
    assert_eq!(error_code(&r), -32602);
    let r = a.call(12, "session/new", json!({"cwd": "/"}));
    assert_eq!(error_code(&r), -32602, "mcpServers is required");
    let r = a.call(
        13,
        "session/prompt",
        json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(error_code(&r), -32002, "an unknown session");
    let r = a.call(
        14,
        "session/load",
        json!({"sessionId": "0123456789abcdef0123456789abcdef", "cwd": a.cwd.path(), "mcpServers": []}),
    );
    assert_eq!(error_code(&r), -32002, "a session that is not saved");
    // A line past 4 MiB is refused whole, and the next one is read.
    a.send(&"x".repeat((4 << 20) + 1));
    let r = a.next();
    assert_eq!((error_code(&r), &r["id"]), (-32600, &Value::Null));
    let r = a.call(15, "no/such/method", json!({}));
    assert_eq!(error_code(&r), -32601);
    // No answer echoes what came in.
    assert!(!r.to_string().contains("no/such/method"));
    assert_eq!(a.end(), 0);
}

#[test]
fn a_prompt_of_16_kib_is_sent_and_one_byte_more_is_refused_never_cut() {
    let mut a = Acp::start();
    a.initialize();
    let sid = a.new_session();
    // The echo model answers with the prompt: the whole of it comes back.
    let edge = "y".repeat(16_384);
    let r = a.call(
        20,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": edge}]}),
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let over = json!([{"type": "text", "text": "z".repeat(16_000)},
        {"type": "resource", "resource": {"uri": "file:///w/a.txt", "text": "w".repeat(400)}}]);
    let r = a.call(
        21,
        "session/prompt",
        json!({"sessionId": sid, "prompt": over}),
    );
    assert_eq!(error_code(&r), -32602, "{r}");
    let image = json!([{"type": "image", "data": "AA==", "mimeType": "image/png"}]);
    let r = a.call(
        22,
        "session/prompt",
        json!({"sessionId": sid, "prompt": image}),
    );
    assert_eq!(error_code(&r), -32602);
    assert_eq!(a.end(), 0);
}

#[test]
fn a_backend_child_never_outlives_the_adapter() {
    // EOF: each child gets shutdown and exits before the adapter does.
    let mut a = Acp::start();
    a.initialize();
    a.new_session();
    let pid = a.child.id();
    let backends = children(pid);
    assert_eq!(backends.len(), 1, "one serve child per session");
    assert_eq!(a.end(), 0);
    assert!(backends.iter().all(|p| !alive(*p)));

    // Killed outright: the child dies with it.
    let mut a = Acp::start();
    a.initialize();
    a.new_session();
    let pid = a.child.id();
    let backends = children(pid);
    assert_eq!(backends.len(), 1);
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let gone = within(WAIT, || backends.iter().all(|p| !alive(*p)).then_some(()));
    assert!(gone.is_some(), "a backend outlived the adapter");
}

#[test]
fn eof_during_a_turn_ends_it_and_the_adapter_exits_0() {
    let turns = json!([{"steps": [{"text": "slow"}, {"sleep_ms": 30000}, {"text": " never"}]}]);
    let mut a = Acp::start_with(Some(turns));
    a.initialize();
    let sid = a.new_session();
    let backends = children(a.child.id());
    let prompt = json!({"jsonrpc": "2.0", "id": 30, "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}});
    a.send(&prompt.to_string());
    // The turn runs: its first chunk came.
    loop {
        let v = a.next();
        if v["params"]["update"]["content"]["text"] == "slow" {
            break;
        }
    }
    let started = std::time::Instant::now();
    drop(a.stdin.take());
    let r = a.answer(&json!(30));
    assert_eq!(
        error_code(&r),
        -32603,
        "the prompt ends with the adapter: {r}"
    );
    let status = within(WAIT, || a.child.try_wait().unwrap()).expect("the adapter exits");
    assert_eq!(status.code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(backends.iter().all(|p| !alive(*p)));
}

#[test]
fn the_step_limit_is_max_turn_requests_and_a_failed_turn_says_why() {
    let prompt = |a: &mut Acp, sid: &str, id: u64| {
        a.call(
            id,
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        )
    };
    let steps = json!([{"steps": [{"tool": {"name": "list_dir", "input": {"path": "."}}},
        {"text": "done"}]}]);
    let mut a = Acp::start_with_settings(Some(steps), json!({"runner": {"max_steps": 1}}));
    a.initialize();
    let sid = a.new_session();
    let r = prompt(&mut a, &sid, 40);
    assert_eq!(r["result"]["stopReason"], "max_turn_requests", "{r}");
    assert_eq!(a.end(), 0);

    let mut a = Acp::start_with(Some(json!([{"steps": [{"fail": "boom"}]}])));
    a.initialize();
    let sid = a.new_session();
    let r = prompt(&mut a, &sid, 41);
    assert_eq!(error_code(&r), -32603, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("the turn failed: "), "{message}");
    assert!(
        message.ends_with(')'),
        "the code follows the words: {message}"
    );
    assert_eq!(a.end(), 0);
}

#[test]
fn a_permission_left_open_is_withdrawn_when_its_call_ends() {
    let turns = json!([{"steps": [
        {"tool": {"name": "write_file", "input": {"path": "a.txt", "content": "x"}}},
        {"text": "after"}]}]);
    let mut a = Acp::start_with(Some(turns));
    a.initialize();
    let sid = a.new_session();
    let prompt = json!({"jsonrpc": "2.0", "id": 50, "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "write"}]}});
    a.send(&prompt.to_string());
    let asked = loop {
        let v = a.next();
        if v["method"] == "session/request_permission" {
            break v;
        }
    };
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}});
    a.send(&cancel.to_string());
    let mut withdrawn = false;
    let answer = loop {
        let v = a.next();
        if v["method"] == "$/cancel_request" {
            assert_eq!(v["params"]["requestId"], asked["id"]);
            withdrawn = true;
        }
        if v["id"] == json!(50) {
            break v;
        }
    };
    assert!(
        withdrawn,
        "the open request was withdrawn before the answer"
    );
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    // A late answer changes nothing.
    let late = json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}});
    a.send(&late.to_string());
    let cwd = a.cwd.path().to_owned();
    assert_eq!(a.end(), 0);
    assert!(!cwd.join("a.txt").exists());
}

#[test]
fn a_session_whose_backend_died_ends_and_loads_again() {
    let mut a = Acp::start();
    a.initialize();
    let sid = a.new_session();
    let prompt = |a: &mut Acp, id: u64| {
        a.call(
            id,
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}),
        )
    };
    let r = prompt(&mut a, 60);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let backends = children(a.child.id());
    assert_eq!(backends.len(), 1);
    // SAFETY: kill(2) with a pid this test's adapter started.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(backends[0] as libc::pid_t, libc::SIGKILL);
    }
    let r = prompt(&mut a, 61);
    assert_eq!(error_code(&r), -32603, "{r}");
    // Answered either way: by the ending session, or as no session once it is gone.
    let r = prompt(&mut a, 62);
    assert!(
        [-32603, -32002].contains(&error_code(&r)),
        "the session ended: {r}"
    );
    let cwd = a.cwd.path().to_owned();
    let r = a.call(
        63,
        "session/load",
        json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
    );
    assert!(r.get("result").is_some(), "loaded again: {r}");
    let r = prompt(&mut a, 64);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(a.end(), 0);
}

#[test]
fn sixteen_sessions_run_at_once_and_a_seventeenth_is_refused() {
    let mut a = Acp::start();
    a.initialize();
    let cwd = a.cwd.path().to_str().unwrap().to_owned();
    for id in 0..16u64 {
        let r = a.call(
            100 + id,
            "session/new",
            json!({"cwd": cwd, "mcpServers": []}),
        );
        assert!(r["result"]["sessionId"].is_string(), "session {id}: {r}");
    }
    assert_eq!(children(a.child.id()).len(), 16, "one child each");
    let r = a.call(116, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert_eq!(error_code(&r), -32603, "{r}");
    assert_eq!(children(a.child.id()).len(), 16, "no seventeenth child");
    assert_eq!(a.end(), 0);
}

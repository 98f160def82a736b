//! Helpers for integration tests that spawn the real `magi-code serve --stdio` binary over
//! real pipes.
//!
//! Every read is bounded: stdout and stderr are drained by reader threads into channels that
//! are read with `recv_timeout`, stdin is fed by a writer thread (so a server that stops
//! reading cannot block the test thread), and every wait for exit polls against a deadline and
//! kills the child on expiry. Every output frame is checked against the envelope the protocol
//! promises (fields, `seq` continuity, one `instance_id`, `{"code"}`-only errors).
#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The binary under test.
pub const EXE: &str = env!("CARGO_BIN_EXE_magi-code");
/// The protocol name.
pub const PROTOCOL: &str = "magi-code.local-agent";
/// The longest a test waits for any single frame or exit.
pub const STEP: Duration = Duration::from_secs(10);
/// Input frame bound (bytes, excluding LF).
pub const INPUT_FRAME_BYTES: usize = 65_536;
/// Output frame bound (bytes, including LF).
pub const OUTPUT_FRAME_BYTES: usize = 65_536;

/// The sixteen base capabilities in the order of the protocol's "Implemented" list.
pub const BASE_CAPABILITIES: [&str; 16] = [
    "initialize",
    "status",
    "shutdown",
    "session.create",
    "session.open",
    "session.list",
    "session.discover",
    "model.catalog",
    "model.catalog.status",
    "model.refresh",
    "operation.cancel",
    "selection.set",
    "history.page",
    "turn.start",
    "turn.cancel",
    "approval.answer",
];

/// Every key of the base `limits` object with its version-1 value (decisions.md 9 plus the
/// `discovery_*`, `catalog_*` and `selection_append_bytes` bounds of the protocol).
pub const BASE_LIMITS: [(&str, u64); 46] = [
    ("input_frame_bytes", 65_536),
    ("output_frame_bytes", 65_536),
    ("json_depth", 32),
    ("id_bytes", 64),
    ("prompt_bytes", 16_384),
    ("history_chunk_bytes", 16_384),
    ("live_chunk_bytes", 4_000),
    ("history_page_bytes", 32_768),
    ("history_page_entries", 100),
    ("history_snapshot_bytes", 8_388_608),
    ("history_snapshot_parts", 10_000),
    ("history_read_bytes", 67_108_864),
    ("history_read_lines", 100_000),
    ("pending_output_frames", 32),
    ("worker_events", 32),
    ("critical_event_wait_ms", 2_000),
    ("run_content_bytes", 8_388_608),
    ("run_content_segments", 512),
    ("run_activities", 4_096),
    ("activity_id_bytes", 1_024),
    ("summary_bytes", 1_024),
    ("approval_expiry_ms", 60_000),
    ("request_ids", 4_096),
    ("output_deadline_ms", 2_000),
    ("cleanup_wait_ms", 2_000),
    ("required_capabilities", 16),
    ("discovery_page_bytes", 32_768),
    ("discovery_page_entries", 100),
    ("discovery_directory_entries", 4_096),
    ("discovery_sessions", 256),
    ("discovery_session_bytes", 8_388_608),
    ("discovery_session_lines", 10_000),
    ("discovery_scan_bytes", 67_108_864),
    ("discovery_scan_lines", 100_000),
    ("discovery_scan_ms", 2_000),
    ("discovery_title_bytes", 256),
    ("catalog_page_bytes", 32_768),
    ("catalog_page_entries", 100),
    ("catalog_providers", 32),
    ("catalog_models", 2_048),
    ("catalog_file_bytes", 1_048_576),
    ("catalog_scan_bytes", 8_388_608),
    ("catalog_snapshot_bytes", 1_048_576),
    ("catalog_string_bytes", 256),
    ("catalog_scan_ms", 2_000),
    ("selection_append_bytes", 4_096),
];

/// A request frame (without LF).
#[must_use]
pub fn frame(id: &str, method: &str, params: &Value) -> String {
    format!(
        r#"{{"protocol":"{PROTOCOL}","version":1,"id":{},"method":{},"params":{}}}"#,
        Value::from(id),
        Value::from(method),
        params
    )
}

/// A `status` request frame padded with spaces inside the JSON to exactly `len` bytes
/// (excluding any line terminator).
#[must_use]
pub fn padded_status(id: &str, len: usize) -> String {
    let head = format!(
        r#"{{"protocol":"{PROTOCOL}","version":1,"id":{},"method":"status","params":{{}}"#,
        Value::from(id)
    );
    assert!(head.len() < len, "padding target too small");
    let mut s = head;
    s.push_str(&" ".repeat(len - s.len() - 1));
    s.push('}');
    assert_eq!(s.len(), len);
    s
}

/// The `initialize` params requiring `caps`.
#[must_use]
pub fn init_params(caps: &[&str]) -> Value {
    json!({ "required_capabilities": caps })
}

/// The result of a response frame; panics on an error response.
#[track_caller]
pub fn result(frame: &Value) -> &Value {
    match frame.get("result") {
        Some(r) => r,
        None => panic!("expected a result, got {frame}"),
    }
}

/// The error code of a response frame; panics on a result.
#[track_caller]
pub fn error_code(frame: &Value) -> &str {
    match frame
        .get("error")
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
    {
        Some(c) => c,
        None => panic!("expected an error, got {frame}"),
    }
}

/// Asserts a response frame is an error with `code` for `id` (`None` = `id: null`).
#[track_caller]
pub fn assert_error(frame: &Value, id: Option<&str>, code: &str) {
    assert_eq!(frame["type"], "response", "not a response: {frame}");
    assert_eq!(error_code(frame), code, "wrong error in {frame}");
    match id {
        Some(id) => assert_eq!(frame["id"], id, "wrong id in {frame}"),
        None => assert!(frame["id"].is_null(), "expected id null in {frame}"),
    }
}

/// Whether `s` is 64 lowercase hex characters.
#[must_use]
pub fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// Asserts `v` is an object with exactly the keys `expected`.
#[track_caller]
pub fn assert_keys(v: &Value, expected: &[&str]) {
    assert!(v.is_object(), "not an object: {v}");
    let want: BTreeSet<&str> = expected.iter().copied().collect();
    assert_eq!(keys(v), want, "wrong keys in {v}");
}

const STATUS_KEYS: [&str; 8] = [
    "state",
    "readiness",
    "provider",
    "model",
    "context_id",
    "session_id",
    "run_id",
    "selection",
];

/// Asserts a ready, idle, unattached `status` object for `provider`/`model`; returns its
/// `context_id`.
#[track_caller]
pub fn assert_ready_status(status: &Value, provider: &str, model: &str) -> String {
    assert_keys(status, &STATUS_KEYS);
    assert_eq!(status["state"], "idle", "{status}");
    assert_eq!(status["readiness"], "ready", "{status}");
    assert_eq!(status["provider"], provider, "{status}");
    assert_eq!(status["model"], model, "{status}");
    assert!(status["session_id"].is_null(), "{status}");
    assert!(status["run_id"].is_null(), "{status}");
    let ctx = status["context_id"].as_str().expect("context_id string");
    assert!(is_digest(ctx), "context_id is not 64 lowercase hex: {ctx}");
    assert_selection(&status["selection"], provider, model);
    ctx.to_owned()
}

const EFFORTS: [&str; 6] = ["default", "low", "medium", "high", "xhigh", "max"];

/// Asserts a `status.selection` object for `provider`/`model`.
#[track_caller]
pub fn assert_selection(sel: &Value, provider: &str, model: &str) {
    assert_keys(
        sel,
        &[
            "revision",
            "provider",
            "model",
            "requested_effort",
            "effective_effort",
            "effort_support",
            "permitted_efforts",
        ],
    );
    let rev = sel["revision"].as_str().expect("selection revision string");
    assert!(!rev.is_empty() && rev.len() <= 64, "{sel}");
    assert_eq!(sel["provider"], provider, "{sel}");
    assert_eq!(sel["model"], model, "{sel}");
    let req = sel["requested_effort"].as_str().expect("requested_effort");
    assert!(EFFORTS.contains(&req), "{sel}");
    assert!(
        sel["effective_effort"].is_null()
            || sel["effective_effort"]
                .as_str()
                .is_some_and(|e| EFFORTS.contains(&e)),
        "{sel}"
    );
    assert!(
        matches!(
            sel["effort_support"].as_str(),
            Some("supported" | "unsupported" | "unknown")
        ),
        "{sel}"
    );
    let permitted = sel["permitted_efforts"]
        .as_array()
        .expect("permitted_efforts");
    assert!(
        permitted
            .iter()
            .all(|e| e.as_str().is_some_and(|e| EFFORTS.contains(&e))),
        "{sel}"
    );
}

/// Asserts a `status` object of a pending startup.
#[track_caller]
pub fn assert_starting_status(status: &Value) {
    assert_keys(status, &STATUS_KEYS);
    assert_eq!(status["state"], "starting", "{status}");
    assert_eq!(status["readiness"], "initializing", "{status}");
    for k in [
        "provider",
        "model",
        "context_id",
        "session_id",
        "run_id",
        "selection",
    ] {
        assert!(
            status[k].is_null(),
            "{k} should be null while starting: {status}"
        );
    }
}

/// Asserts a `status` object of a failed startup with readiness `code`.
#[track_caller]
pub fn assert_failed_status(status: &Value, code: &str) {
    assert_keys(status, &STATUS_KEYS);
    assert_eq!(status["state"], "failed", "{status}");
    assert_eq!(status["readiness"], code, "{status}");
    assert!(status["session_id"].is_null(), "{status}");
    assert!(status["run_id"].is_null(), "{status}");
    assert!(
        status["selection"].is_null(),
        "selection is null after failed startup: {status}"
    );
    assert!(
        status["context_id"].is_null() || status["context_id"].as_str().is_some_and(is_digest),
        "{status}"
    );
}

/// Asserts `path` is a directory with mode 0700.
#[track_caller]
pub fn assert_dir_0700(path: &Path) {
    let meta = fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(meta.is_dir(), "{} is not a directory", path.display());
    assert_eq!(
        meta.permissions().mode() & 0o7777,
        0o700,
        "{} mode",
        path.display()
    );
}

/// Polls `child` until it exits or `timeout` passes (then kills it and panics).
#[track_caller]
pub fn wait_exit(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child did not exit within {timeout:?}");
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// The exit code of a status; panics if the child died from a signal.
#[track_caller]
pub fn code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| panic!("child died from a signal: {status:?}"))
}

/// Reads a pipe to its end on a thread; the bytes arrive on the returned channel.
pub fn drain<R: Read + Send + 'static>(mut r: R) -> Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// One fresh environment: a temporary directory holding a not-yet-created `MC_HOME`
/// (`<tmp>/home`) and a created working directory (`<tmp>/cwd`).
pub struct Env {
    dir: TempDir,
    /// The temporary directory.
    pub root: PathBuf,
    /// The path passed as `MC_HOME` (relative paths resolve against `cwd`).
    pub mc_home: OsString,
    /// The working directory of the child.
    pub cwd: PathBuf,
    /// Extra environment variables for the child.
    pub vars: Vec<(OsString, OsString)>,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    /// A fresh environment.
    #[must_use]
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let cwd = root.join("cwd");
        fs::create_dir(&cwd).expect("create cwd");
        Self {
            mc_home: root.join("home").into_os_string(),
            dir,
            root,
            cwd,
            vars: Vec::new(),
        }
    }

    /// The storage root as a path (resolved against `cwd` when relative).
    #[must_use]
    pub fn home(&self) -> PathBuf {
        self.cwd.join(&self.mc_home)
    }

    /// Uses `path` as `MC_HOME`.
    pub fn set_mc_home(&mut self, path: impl AsRef<OsStr>) {
        self.mc_home = path.as_ref().to_owned();
    }

    /// Adds an environment variable for the child.
    pub fn set_var(&mut self, k: &str, v: &str) {
        self.vars.push((k.into(), v.into()));
    }

    /// Writes `MC_HOME/settings.json` (creating `MC_HOME` with mode 0700).
    pub fn write_global_settings(&self, settings: &Value) {
        self.write_global_settings_raw(settings.to_string().as_bytes());
    }

    /// Writes raw bytes as `MC_HOME/settings.json`.
    pub fn write_global_settings_raw(&self, bytes: &[u8]) {
        let home = self.home();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&home)
            .expect("create MC_HOME");
        fs::write(home.join("settings.json"), bytes).expect("write global settings");
    }

    /// Writes `<cwd>/.magi/settings.json`.
    pub fn write_project_settings(&self, settings: &Value) {
        let dir = self.cwd.join(".magi");
        fs::create_dir_all(&dir).expect("create .magi");
        fs::write(dir.join("settings.json"), settings.to_string()).expect("write settings");
    }

    /// A command running the binary with `args` in this environment: cleared environment
    /// except `PATH`, `HOME` (the temporary directory), `MC_HOME` and the extra variables.
    #[must_use]
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(EXE);
        c.args(args)
            .current_dir(&self.cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.root)
            .env("MC_HOME", &self.mc_home);
        for (k, v) in &self.vars {
            c.env(k, v);
        }
        c
    }

    /// Spawns `serve --stdio` with a reader thread that keeps consuming stdout.
    #[must_use]
    pub fn spawn(&self) -> Server {
        Server::spawn(self.command(&["serve", "--stdio"]), true)
    }

    /// Spawns `serve --stdio` whose stdout is never read.
    #[must_use]
    pub fn spawn_unread(&self) -> Server {
        Server::spawn(self.command(&["serve", "--stdio"]), false)
    }

    /// Keeps the temporary directory alive (for paths borrowed by other environments).
    #[must_use]
    pub fn tempdir(&self) -> &Path {
        self.dir.path()
    }
}

enum Out {
    Line(Vec<u8>),
    Eof,
}

/// A running `serve --stdio` child.
pub struct Server {
    child: Child,
    input: Option<Sender<Vec<u8>>>,
    output: Option<Receiver<Out>>,
    unread_stdout: Option<ChildStdout>,
    stderr: Receiver<Vec<u8>>,
    stderr_bytes: Option<Vec<u8>>,
    /// The last `seq` seen.
    pub seq: u64,
    /// The `instance_id` of every frame so far.
    pub instance_id: Option<String>,
    /// When the child was spawned.
    pub started: Instant,
}

impl Server {
    /// Spawns `cmd` with piped stdio; `read` starts the stdout reader thread.
    #[must_use]
    pub fn spawn(mut cmd: Command, read: bool) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn magi-code");
        let started = Instant::now();
        let mut stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = drain(child.stderr.take().expect("stderr"));
        let (in_tx, in_rx) = mpsc::channel::<Vec<u8>>();
        thread::spawn(move || {
            for chunk in in_rx {
                if stdin.write_all(&chunk).is_err() || stdin.flush().is_err() {
                    break;
                }
            }
            // Dropping stdin here closes the pipe.
        });
        let (output, unread_stdout) = if read {
            let (tx, rx) = mpsc::channel();
            thread::spawn(move || {
                let mut r = BufReader::with_capacity(1 << 16, stdout);
                loop {
                    let mut line = Vec::new();
                    match r.read_until(b'\n', &mut line) {
                        Ok(0) | Err(_) => {
                            let _ = tx.send(Out::Eof);
                            break;
                        }
                        Ok(_) => {
                            if tx.send(Out::Line(line)).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
            (Some(rx), None)
        } else {
            (None, Some(stdout))
        };
        Self {
            child,
            input: Some(in_tx),
            output,
            unread_stdout,
            stderr,
            stderr_bytes: None,
            seq: 0,
            instance_id: None,
            started,
        }
    }

    /// Queues raw bytes for stdin (written by the writer thread, in order).
    pub fn send_raw(&self, bytes: impl Into<Vec<u8>>) {
        if let Some(tx) = &self.input {
            // A closed pipe (child gone) is not an error for the test thread.
            let _ = tx.send(bytes.into());
        }
    }

    /// Queues `line` plus LF.
    pub fn send_line(&self, line: &str) {
        let mut b = line.as_bytes().to_vec();
        b.push(b'\n');
        self.send_raw(b);
    }

    /// Queues a request.
    pub fn request(&self, id: &str, method: &str, params: &Value) {
        self.send_line(&frame(id, method, params));
    }

    /// Closes stdin after everything queued so far has been written.
    pub fn close_stdin(&mut self) {
        self.input = None;
    }

    fn receiver(&self) -> &Receiver<Out> {
        self.output
            .as_ref()
            .expect("this server's stdout is not being read")
    }

    /// The next output frame within `timeout`, checked against the envelope rules.
    #[track_caller]
    pub fn next_within(&mut self, timeout: Duration) -> Value {
        match self.receiver().recv_timeout(timeout) {
            Ok(Out::Line(line)) => self.check(&line),
            Ok(Out::Eof) => panic!("stdout closed while a frame was expected"),
            Err(RecvTimeoutError::Timeout) => panic!("no output frame within {timeout:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("stdout reader gone"),
        }
    }

    /// The next output frame (within [`STEP`]).
    #[track_caller]
    pub fn next(&mut self) -> Value {
        self.next_within(STEP)
    }

    /// The next frame, which must be the response to `id`.
    #[track_caller]
    pub fn response(&mut self, id: &str) -> Value {
        let f = self.next();
        assert_eq!(f["type"], "response", "{f}");
        assert_eq!(f["id"], id, "expected the response to {id}, got {f}");
        f
    }

    /// Sends a request and returns the next frame, which must be its response.
    #[track_caller]
    pub fn call(&mut self, id: &str, method: &str, params: &Value) -> Value {
        self.request(id, method, params);
        self.response(id)
    }

    /// Collects the responses to `ids` in whatever order they arrive (no other frames allowed).
    #[track_caller]
    pub fn responses(&mut self, ids: &[&str]) -> HashMap<String, Value> {
        let mut got = HashMap::new();
        while got.len() < ids.len() {
            let f = self.next();
            let id = f["id"]
                .as_str()
                .unwrap_or_else(|| panic!("unexpected {f}"))
                .to_owned();
            assert!(ids.contains(&id.as_str()), "unexpected frame {f}");
            assert!(got.insert(id.clone(), f).is_none(), "two responses to {id}");
        }
        got
    }

    /// `initialize` requiring `status` and `shutdown`; asserts success and returns the result.
    #[track_caller]
    pub fn initialize(&mut self) -> Value {
        let f = self.call("init", "initialize", &init_params(&["status", "shutdown"]));
        result(&f).clone()
    }

    /// Asserts stdout reaches EOF within `timeout` without another frame.
    #[track_caller]
    pub fn expect_eof_within(&mut self, timeout: Duration) {
        match self.receiver().recv_timeout(timeout) {
            Ok(Out::Eof) => {}
            Ok(Out::Line(line)) => {
                panic!("expected EOF, got {:?}", String::from_utf8_lossy(&line))
            }
            Err(_) => panic!("stdout not closed within {timeout:?}"),
        }
    }

    /// Every remaining frame up to stdout EOF (which must come within [`STEP`]).
    #[track_caller]
    pub fn frames_until_eof(&mut self) -> Vec<Value> {
        let deadline = Instant::now() + STEP;
        let mut frames = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.receiver().recv_timeout(left) {
                Ok(Out::Line(line)) => frames.push(self.check(&line)),
                Ok(Out::Eof) => return frames,
                Err(_) => panic!("stdout not closed within {STEP:?}"),
            }
        }
    }

    /// Asserts stdout reaches EOF without another frame.
    #[track_caller]
    pub fn expect_eof(&mut self) {
        self.expect_eof_within(STEP);
    }

    /// Asserts that no frame arrives within `d` (stdout may stay open).
    #[track_caller]
    pub fn expect_silence(&mut self, d: Duration) {
        match self.receiver().recv_timeout(d) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(Out::Line(line)) => {
                panic!("unexpected frame {:?}", String::from_utf8_lossy(&line))
            }
            Ok(Out::Eof) => panic!("stdout closed unexpectedly"),
            Err(RecvTimeoutError::Disconnected) => panic!("stdout reader gone"),
        }
    }

    /// Waits for the child to exit within `timeout`; returns its exit code.
    #[track_caller]
    pub fn exit_code_within(&mut self, timeout: Duration) -> i32 {
        code(wait_exit(&mut self.child, timeout))
    }

    /// Waits for the child to exit within [`STEP`]; returns its exit code.
    #[track_caller]
    pub fn exit_code(&mut self) -> i32 {
        self.exit_code_within(STEP)
    }

    /// Everything the child wrote to stderr (call after it exited).
    #[track_caller]
    pub fn stderr(&mut self) -> Vec<u8> {
        if self.stderr_bytes.is_none() {
            let b = self
                .stderr
                .recv_timeout(STEP)
                .expect("stderr not closed after exit");
            self.stderr_bytes = Some(b);
        }
        self.stderr_bytes.clone().unwrap_or_default()
    }

    /// Asserts the child wrote nothing to stderr (call after it exited).
    #[track_caller]
    pub fn assert_stderr_empty(&mut self) {
        let e = self.stderr();
        assert!(
            e.is_empty(),
            "stderr must stay silent while serving, got {:?}",
            String::from_utf8_lossy(&e)
        );
    }

    /// Sends `shutdown`, asserts `{"state":"stopping"}`, EOF, exit 0 and silent stderr.
    #[track_caller]
    pub fn shutdown_ok(&mut self, id: &str) {
        let f = self.call(id, "shutdown", &json!({}));
        assert_eq!(result(&f), &json!({"state": "stopping"}));
        self.expect_eof();
        assert_eq!(self.exit_code(), 0, "exit status after shutdown");
        self.assert_stderr_empty();
    }

    /// Whether the child has exited (non-blocking).
    pub fn has_exited(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_some()
    }

    #[track_caller]
    fn check(&mut self, line: &[u8]) -> Value {
        let shown = String::from_utf8_lossy(line);
        assert!(
            line.ends_with(b"\n"),
            "partial output line (no LF): {shown:?}"
        );
        assert!(
            line.len() <= OUTPUT_FRAME_BYTES,
            "output frame of {} bytes",
            line.len()
        );
        let text = std::str::from_utf8(&line[..line.len() - 1])
            .unwrap_or_else(|_| panic!("output frame is not UTF-8: {shown:?}"));
        let v: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("output frame is not JSON ({e}): {shown:?}"));
        assert!(v.is_object(), "output frame is not an object: {v}");
        assert_eq!(v["protocol"], PROTOCOL, "{v}");
        assert!(
            v["version"].is_u64() && v["version"] == 1,
            "version must be the integer 1: {v}"
        );
        let iid = v["instance_id"]
            .as_str()
            .unwrap_or_else(|| panic!("instance_id missing: {v}"));
        assert!(is_uuid(iid), "instance_id is not a UUID: {v}");
        match &self.instance_id {
            Some(prev) => assert_eq!(prev, iid, "instance_id changed within one child"),
            None => self.instance_id = Some(iid.to_owned()),
        }
        let seq = v["seq"]
            .as_u64()
            .unwrap_or_else(|| panic!("seq must be an integer: {v}"));
        assert_eq!(
            seq,
            self.seq + 1,
            "seq must start at 1 and increase by exactly 1: {v}"
        );
        self.seq = seq;
        match v["type"].as_str() {
            Some("response") => {
                let has_result = v.get("result").is_some();
                let has_error = v.get("error").is_some();
                assert!(has_result != has_error, "exactly one of result/error: {v}");
                let last = if has_result { "result" } else { "error" };
                assert_keys(
                    &v,
                    &[
                        "protocol",
                        "version",
                        "type",
                        "instance_id",
                        "seq",
                        "id",
                        last,
                    ],
                );
                assert!(
                    v["id"].is_null() || v["id"].is_string(),
                    "id must be a string or null: {v}"
                );
                if has_error {
                    assert_keys(&v["error"], &["code"]);
                    assert!(v["error"]["code"].is_string(), "{v}");
                }
            }
            Some("event") => {
                assert_keys(
                    &v,
                    &[
                        "protocol",
                        "version",
                        "type",
                        "instance_id",
                        "seq",
                        "event",
                        "data",
                    ],
                );
            }
            _ => panic!("unknown frame type: {v}"),
        }
        v
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.input = None;
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        drop(self.unread_stdout.take());
    }
}

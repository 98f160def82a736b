//! The child under test: a fresh environment ([`Env`]) and a running `serve --stdio` child
//! ([`Server`]) whose every read is bounded.

use super::frames::{check_envelope, frame, init_params, result};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The binary under test.
pub const EXE: &str = env!("CARGO_BIN_EXE_magi-code");
/// The longest a test waits for any single frame or exit: a guard against a hang, never a
/// timing assertion, so it is generous. A debug build on a loaded 2-core machine can spend
/// many seconds between two frames of a heavy test (an 8 MiB reply redacted and stored).
pub const STEP: Duration = Duration::from_secs(60);

/// Polls `child` until it exits or `timeout` passes (then kills it and panics).
#[track_caller]
pub fn wait_exit(child: &mut Child, timeout: Duration) -> ExitStatus {
    if let Some(status) = super::poll::within(timeout, || child.try_wait().expect("try_wait")) {
        return status;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("child did not exit within {timeout:?}");
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
    /// Owns the temporary directory: it is removed when the environment is dropped.
    _dir: TempDir,
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
            _dir: dir,
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
        let f = frame(id, method, params);
        super::schema::record_request(self.pid(), &f);
        self.send_line(&f);
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

    /// SIGKILLs the child while its stdin is still open (a crash, not an EOF), then reaps it.
    pub fn crash(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The child's process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
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

    #[track_caller]
    fn check(&mut self, line: &[u8]) -> Value {
        let frame = check_envelope(line, &mut self.seq, &mut self.instance_id);
        super::schema::check_frame(self.pid(), &frame);
        frame
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

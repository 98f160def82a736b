//! One MCP server child over stdio: spawn, a reader thread feeding bounded lines to the
//! JSON-RPC session, blocking cancellable requests, and bounded teardown.

use super::jsonrpc::{Incoming, RpcError, Session, LINE_BYTES};
use super::protocol::cancelled_params;
use crate::util::cancel::Cancel;
use crate::util::proc::{kill_group, term_group};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Longest a waiting request sleeps between checks of cancellation and its deadline.
const POLL: Duration = Duration::from_millis(20);
/// Longest teardown waits for an exit after closing stdin.
const EOF_WAIT: Duration = Duration::from_millis(1000);

/// A stdio server's definition, read back from its canonical JSON (`config/mcp_servers.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioDef {
    /// The server's name in `mcp.servers`.
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to its environment.
    pub env: BTreeMap<String, String>,
}

impl StdioDef {
    /// Parses a canonical definition; None if it is not one.
    #[must_use]
    pub fn from_canonical(canonical: &str) -> Option<Self> {
        let v: Value = serde_json::from_str(canonical).ok()?;
        let strs = |v: Option<&Value>| -> Option<Vec<String>> {
            v.map_or(Some(Vec::new()), |a| {
                a.as_array()?
                    .iter()
                    .map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
        };
        let env = match v.get("env") {
            None => BTreeMap::new(),
            Some(e) => e
                .as_object()?
                .iter()
                .map(|(k, x)| Some((k.clone(), x.as_str()?.to_owned())))
                .collect::<Option<_>>()?,
        };
        // Values the definition passes under a secret's name are tokens the backend loaded:
        // redaction knows them (decisions.md 35 (a)).
        for (k, x) in &env {
            let k = k.to_ascii_uppercase();
            if ["KEY", "SECRET", "TOKEN", "PASSWORD"]
                .iter()
                .any(|w| k.contains(w))
            {
                crate::util::redact::register_secret(x);
            }
        }
        Some(Self {
            name: v.get("name")?.as_str()?.to_owned(),
            command: v.get("command")?.as_str()?.to_owned(),
            args: strs(v.get("args"))?,
            env,
        })
    }
}

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The server answered with a JSON-RPC error.
    Rpc(RpcError),
    /// No answer by the deadline (`notifications/cancelled` was sent).
    Timeout,
    /// Cancelled while waiting (`notifications/cancelled` was sent).
    Cancelled,
    /// The server exited or closed its stdout.
    Exited,
    /// The server broke the protocol (more garbage than tolerated, a line over the bound)
    /// and was killed for it.
    Failed,
    /// Too many requests already wait.
    Busy,
    /// HTTP: the server refused the authorization and no refresh helped (`mcp_auth_required`).
    Auth,
    /// HTTP: the request failed (unreachable, a status other than 2xx, an answer cut short);
    /// the next request tries again.
    Unreachable,
}

#[derive(Default)]
struct State {
    session: Session,
    answers: HashMap<u64, Result<Value, RpcError>>,
    timed_out: HashSet<u64>,
    dead: bool,
    /// Given up on for a protocol failure (and killed), not exited on its own.
    failed: bool,
    /// That failure is being handled: only its end marks the server dead, so a writer that
    /// meets the killed pipe first cannot report it as exited.
    failing: bool,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    stdin: Mutex<Option<ChildStdin>>,
    /// The child until teardown (or a protocol failure) takes it to reap it.
    child: Mutex<Option<Child>>,
    /// Its pid, which is also its process group.
    pid: u32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Writes every queued line; a failed write means the server is gone.
    fn flush(&self) {
        let lines: Vec<Vec<u8>> = {
            let mut st = lock(&self.state);
            std::iter::from_fn(|| st.session.poll_write()).collect()
        };
        if lines.is_empty() {
            return;
        }
        let mut stdin = lock(&self.stdin);
        let Some(w) = stdin.as_mut() else {
            return;
        };
        let ok = lines.iter().all(|l| w.write_all(l).is_ok()) && w.flush().is_ok();
        if !ok {
            *stdin = None;
            drop(stdin);
            self.die();
        }
    }

    fn die(&self) {
        {
            let mut st = lock(&self.state);
            if !st.failing {
                st.dead = true;
            }
        }
        self.cv.notify_all();
    }

    /// Gives up on a server that broke the protocol: marks it failed, then kills its group
    /// at once and reaps it. It is still running, and nothing it says will be read again, so
    /// waiting for it to exit on its own (or reporting it as exited) would be wrong.
    fn fail(&self) {
        lock(&self.state).failing = true;
        // A writer blocked on a full pipe holds the lock: the kill frees it.
        if let Ok(mut stdin) = self.stdin.try_lock() {
            *stdin = None;
        }
        kill_group(self.pid);
        let child = lock(&self.child).take();
        if let Some(mut child) = child {
            // SIGKILL cannot be ignored: this wait is short.
            let _ = child.wait();
        }
        // Only now are waiting calls told: whoever sees `failed` finds the process gone.
        {
            let mut st = lock(&self.state);
            st.failed = true;
            st.dead = true;
        }
        self.cv.notify_all();
    }

    /// Reads stdout lines (each at most [`LINE_BYTES`]) into the session until EOF (the
    /// server is dead) or a protocol failure (it is killed: [`Shared::fail`]).
    fn read_loop(&self, out: impl Read) {
        let mut r = BufReader::new(out);
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut r)
                .take(LINE_BYTES as u64 + 2)
                .read_until(b'\n', &mut line)
            {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            // A line without its newline is the last one before EOF, or one over the bound
            // (which the session refuses).
            if !self.handle(&line) {
                self.fail();
                return;
            }
        }
        self.die();
    }

    /// One line into the session; false when the session gave up on the server.
    fn handle(&self, line: &[u8]) -> bool {
        let got = {
            let mut st = lock(&self.state);
            match st.session.handle_line(line) {
                Ok(Incoming::Response { id, result }) => {
                    st.answers.insert(id, result);
                    true
                }
                Ok(_) => true,
                Err(_) => false,
            }
        };
        self.cv.notify_all();
        self.flush();
        got
    }
}

/// One running MCP server.
pub struct Server {
    shared: Arc<Shared>,
    pid: u32,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("pid", &self.pid).finish()
    }
}

impl Server {
    /// Spawns `def` in its own process group in `cwd`, without the variables `hide`, stdin and
    /// stdout piped, stderr drained and discarded.
    pub fn spawn(def: &StdioDef, cwd: &Path, hide: &[String]) -> io::Result<Self> {
        let mut cmd = Command::new(&def.command);
        cmd.args(&def.args).current_dir(cwd);
        for k in hide {
            cmd.env_remove(k);
        }
        // Variables the approved definition names itself are the user's explicit choice.
        cmd.envs(&def.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let (stdin, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                session: Session::new(),
                ..State::default()
            }),
            cv: Condvar::new(),
            stdin: Mutex::new(stdin),
            child: Mutex::new(Some(child)),
            pid,
        });
        let server = Self {
            shared: shared.clone(),
            pid,
        };
        let started = stdout.is_some_and(|out| {
            std::thread::Builder::new()
                .name("mc-mcp-read".into())
                .spawn(move || shared.read_loop(out))
                .is_ok()
        });
        if let Some(mut err) = stderr {
            let _ = std::thread::Builder::new()
                .name("mc-mcp-stderr".into())
                .spawn(move || io::copy(&mut err, &mut io::sink()));
        }
        if !started {
            server.shutdown(Instant::now());
            return Err(io::Error::other("no reader"));
        }
        Ok(server)
    }

    /// Whether the server has exited or was given up on.
    #[must_use]
    pub fn is_dead(&self) -> bool {
        lock(&self.shared.state).dead
    }

    /// Why a dead server is gone: [`CallError::Failed`] when it was killed for breaking the
    /// protocol, [`CallError::Exited`] otherwise.
    fn gone(st: &State) -> CallError {
        if st.failed {
            CallError::Failed
        } else {
            CallError::Exited
        }
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        lock(&self.shared.state)
            .session
            .send_notification(method, params);
        self.shared.flush();
    }

    /// Sends a request and waits for its answer until `deadline` or `cancel`; on either it
    /// sends `notifications/cancelled` and returns at once.
    pub fn request(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
        cancel: &Cancel,
    ) -> Result<Value, CallError> {
        let sh = &self.shared;
        let id = {
            let mut st = lock(&sh.state);
            if st.dead {
                return Err(Self::gone(&st));
            }
            st.session
                .send_request(method, params, Some(deadline))
                .map_err(|_| CallError::Busy)?
        };
        sh.flush();
        let waker = sh.clone();
        let _hook = cancel.on_cancel(move || waker.cv.notify_all());
        let mut st = lock(&sh.state);
        loop {
            if let Some(answer) = st.answers.remove(&id) {
                return answer.map_err(CallError::Rpc);
            }
            if st.dead {
                return Err(Self::gone(&st));
            }
            let now = Instant::now();
            let late = st.session.handle_timeout(now);
            st.timed_out.extend(late);
            let why = if cancel.is_cancelled() {
                Some(CallError::Cancelled)
            } else if st.timed_out.remove(&id) {
                Some(CallError::Timeout)
            } else {
                None
            };
            if let Some(why) = why {
                st.session.forget(id);
                let reason = if why == CallError::Timeout {
                    "timeout"
                } else {
                    "cancelled"
                };
                st.session
                    .send_notification("notifications/cancelled", cancelled_params(id, reason));
                drop(st);
                sh.flush();
                return Err(why);
            }
            let wait = deadline.saturating_duration_since(now).min(POLL);
            st = sh
                .cv
                .wait_timeout(st, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Stops the server by `deadline`: close stdin, wait, SIGTERM its group, wait, SIGKILL;
    /// a child not reaped by then is left to a detached reaper. Idempotent.
    pub fn shutdown(&self, deadline: Instant) {
        // A writer blocked on a full pipe holds the lock: then the signals do the work.
        if let Ok(mut stdin) = self.shared.stdin.try_lock() {
            *stdin = None;
        }
        let Some(mut child) = lock(&self.shared.child).take() else {
            return;
        };
        let start = Instant::now();
        let budget = deadline.saturating_duration_since(start);
        let eof_until = start + EOF_WAIT.min(budget * 6 / 10);
        let term_until = start + budget * 9 / 10;
        if !wait_until(&mut child, eof_until) {
            term_group(self.pid);
            if !wait_until(&mut child, term_until) {
                kill_group(self.pid);
                if !wait_until(&mut child, deadline) {
                    let _ = std::thread::Builder::new()
                        .name("mc-mcp-reap".into())
                        .spawn(move || child.wait());
                }
            }
        }
        self.shared.die();
    }
}

/// Polls for the child's exit until `until`; whether it exited (and was reaped).
fn wait_until(child: &mut Child, until: Instant) -> bool {
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) => {}
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(10)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canonical_definition_reads_back() {
        let d = StdioDef::from_canonical(
            r#"{"args":["a","b"],"command":"node","env":{"K":"v"},"name":"fs"}"#,
        )
        .unwrap();
        assert_eq!(d.name, "fs");
        assert_eq!(d.command, "node");
        assert_eq!(d.args, vec!["a", "b"]);
        assert_eq!(d.env.get("K").map(String::as_str), Some("v"));
        let bare = StdioDef::from_canonical(r#"{"command":"x","name":"n"}"#).unwrap();
        assert!(bare.args.is_empty() && bare.env.is_empty());
        assert!(StdioDef::from_canonical(r#"{"name":"n"}"#).is_none());
        assert!(StdioDef::from_canonical(r#"{"command":"x","name":"n","args":[1]}"#).is_none());
        assert!(StdioDef::from_canonical("nope").is_none());
    }

    #[test]
    fn a_server_that_ignores_eof_and_sigterm_is_killed_by_the_deadline() {
        let def = StdioDef {
            name: "t".into(),
            command: "sh".into(),
            args: vec![
                "-c".into(),
                "trap '' TERM; while :; do sleep 0.05; done".into(),
            ],
            env: BTreeMap::new(),
        };
        let s = Server::spawn(&def, Path::new("/"), &[]).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let t0 = Instant::now();
        s.shutdown(t0 + Duration::from_millis(600));
        let took = t0.elapsed();
        assert!(took < Duration::from_millis(900), "{took:?}");
        assert!(s.is_dead());
        let cancel = Cancel::default();
        let r = s.request(
            "x",
            Value::Null,
            Instant::now() + Duration::from_secs(1),
            &cancel,
        );
        assert_eq!(r, Err(CallError::Exited));
    }

    #[test]
    fn a_server_breaking_the_protocol_is_killed_and_its_requests_fail_as_failed() {
        // 17 garbage lines pass the bound of 16; a line of 1 MiB + 1 byte passes its bound.
        for script in [
            "i=0; while [ $i -lt 17 ]; do echo junk; i=$((i+1)); done; exec sleep 30",
            "head -c 1048577 /dev/zero | tr '\\0' x; echo; exec sleep 30",
        ] {
            let def = StdioDef {
                name: "t".into(),
                command: "sh".into(),
                args: vec!["-c".into(), script.into()],
                env: BTreeMap::new(),
            };
            let s = Server::spawn(&def, Path::new("/"), &[]).unwrap();
            let cancel = Cancel::default();
            let r = s.request(
                "x",
                Value::Null,
                Instant::now() + Duration::from_secs(20),
                &cancel,
            );
            assert_eq!(r, Err(CallError::Failed), "{script}");
            assert!(s.is_dead());
            assert!(
                !Path::new(&format!("/proc/{}", s.pid)).exists(),
                "killed and reaped before the failure is reported: {script}"
            );
            s.shutdown(Instant::now() + Duration::from_millis(300));
        }
    }

    #[test]
    fn a_request_times_out_or_is_cancelled_and_a_missing_program_fails_to_spawn() {
        let def = StdioDef {
            name: "t".into(),
            command: "sleep".into(),
            args: vec!["5".into()],
            env: BTreeMap::new(),
        };
        let s = Server::spawn(&def, Path::new("/"), &[]).unwrap();
        let cancel = Cancel::default();
        let t0 = Instant::now();
        let r = s.request("x", Value::Null, t0 + Duration::from_millis(100), &cancel);
        assert_eq!(r, Err(CallError::Timeout));
        assert!(t0.elapsed() < Duration::from_millis(500));
        cancel.cancel();
        let r = s.request("x", Value::Null, t0 + Duration::from_secs(30), &cancel);
        assert_eq!(r, Err(CallError::Cancelled));
        s.shutdown(Instant::now() + Duration::from_millis(300));
        let missing = StdioDef {
            command: "/nonexistent/mcp-server".into(),
            ..def
        };
        assert!(Server::spawn(&missing, Path::new("/"), &[]).is_err());
    }
}

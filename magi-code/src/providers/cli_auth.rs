//! An agent CLI's own readiness check (`backend.md` "Claude through the native CLI"): `<command>
//! auth status --json` run with the CLI's environment and stdin from `/dev/null`, its stdout
//! read up to the first complete JSON object (the process may linger after printing it), the
//! whole bounded by [`STATUS_BOUND`] and cancellable; the process is then ended and reaped.
//! The object is found by a sans-IO scanner ([`FirstObject`]) fed by a thin reader.

use crate::util::cancel::Cancel;
use serde_json::Value;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The whole check's bound (the protocol's "existing 10-second subprocess bound").
pub const STATUS_BOUND: Duration = Duration::from_secs(10);
/// Most bytes of stdout read looking for the object.
pub const STATUS_BYTES: usize = 64 * 1024;
/// The variable that keeps the CLI from traffic the backend did not ask for.
pub const QUIET_VAR: &str = "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC";

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Signed in with a plan (`claude.ai`) or its long-lived token (`oauth_token`).
    Ready,
    /// `loggedIn: false`.
    NotLoggedIn,
    /// Signed in another way (`api_key`, `api_key_helper`): the `anthropic` provider serves keys.
    OtherMethod(String),
    /// The executable is not there (or cannot run).
    Missing,
    /// No answer within the bound.
    TimedOut,
    /// It exited, or its output ended, without a complete JSON object.
    NoAnswer,
    /// The operation was cancelled.
    Cancelled,
}

impl Status {
    /// Whether the provider is available.
    #[must_use]
    pub fn ready(&self) -> bool {
        *self == Self::Ready
    }

    /// What the object says.
    #[must_use]
    pub fn of(object: &Value) -> Self {
        if object.get("loggedIn").and_then(Value::as_bool) != Some(true) {
            return Self::NotLoggedIn;
        }
        match object.get("authMethod").and_then(Value::as_str) {
            Some("claude.ai" | "oauth_token") => Self::Ready,
            Some(m) => Self::OtherMethod(crate::util::text::cut(m, 64).to_owned()),
            None => Self::OtherMethod("unknown".to_owned()),
        }
    }
}

/// Finds the first complete JSON object in a byte stream, sans-IO: bytes before its `{` are
/// skipped, strings and escapes are followed so braces inside them do not count, and nothing
/// past [`STATUS_BYTES`] is held.
#[derive(Debug, Default)]
pub struct FirstObject {
    held: Vec<u8>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    done: bool,
}

impl FirstObject {
    /// Takes the next bytes; the object once it is complete (parsed), `None` meanwhile. A
    /// complete object that is not valid JSON, or one over the bound, gives `Some(None)`.
    pub fn push(&mut self, bytes: &[u8]) -> Option<Option<Value>> {
        if self.done {
            return None;
        }
        for &b in bytes {
            if self.depth == 0 && b != b'{' {
                continue;
            }
            if self.held.len() >= STATUS_BYTES {
                self.done = true;
                return Some(None);
            }
            self.held.push(b);
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' => self.depth += 1,
                b'}' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.done = true;
                        return Some(serde_json::from_slice(&self.held).ok());
                    }
                }
                _ => {}
            }
        }
        None
    }
}

/// Runs `<command> auth status --json` with `env` and says what it found, within `bound` or
/// until `cancel`. The process is killed and reaped as soon as the object is in (or the wait
/// is over), on a thread of its own so nothing waits for a lingering CLI.
#[must_use]
pub fn auth_status(
    command: &str,
    env: &[(OsString, OsString)],
    bound: Duration,
    cancel: &Cancel,
) -> Status {
    let spawned = Command::new(command)
        .args(["auth", "status", "--json"])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    let Ok(mut child) = spawned else {
        return Status::Missing;
    };
    let Some(mut stdout) = child.stdout.take() else {
        end(child);
        return Status::NoAnswer;
    };
    let (tx, rx) = crossbeam_channel::bounded(1);
    let reader = std::thread::Builder::new()
        .name("cli-auth".into())
        .spawn(move || {
            let mut scan = FirstObject::default();
            let mut buf = [0u8; 4096];
            let found = loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break None,
                    Ok(n) => {
                        if let Some(object) = scan.push(&buf[..n]) {
                            break object;
                        }
                    }
                }
            };
            // Nobody may wait any more; then there is nobody to tell.
            drop(tx.send(found));
        });
    if reader.is_err() {
        end(child);
        return Status::NoAnswer;
    }
    let deadline = Instant::now() + bound;
    let status = loop {
        if cancel.is_cancelled() {
            break Status::Cancelled;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Status::TimedOut;
        }
        match rx.recv_timeout(left.min(Duration::from_millis(50))) {
            Ok(Some(object)) => break Status::of(&object),
            Ok(None) | Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                break Status::NoAnswer
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
        }
    };
    end(child);
    status
}

/// Kills the process's group and reaps it on a thread of its own.
fn end(mut child: std::process::Child) {
    crate::util::proc::kill_group(child.id());
    drop(child.kill());
    let reaped = std::thread::Builder::new()
        .name("cli-reap".into())
        .spawn(move || drop(child.wait()));
    // Without a thread, reap here: the process was killed, so the wait is short.
    if let Err(e) = reaped {
        drop(e);
    }
}

/// The CLI's environment: the backend's own less `ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`
/// and every other provider's key variable in `keys` (with an API key present the CLI bills
/// it instead of the plan), plus [`QUIET_VAR`]`=1`; `HOME`, `CLAUDE_CONFIG_DIR` and
/// `ANTHROPIC_BASE_URL` pass through.
#[must_use]
pub fn cli_env(keys: &[String]) -> Vec<(OsString, OsString)> {
    let withheld = |k: &str| {
        matches!(k, "ANTHROPIC_API_KEY" | "ANTHROPIC_AUTH_TOKEN" | QUIET_VAR)
            || keys.iter().any(|v| v == k)
    };
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !k.to_str().is_some_and(withheld))
        .collect();
    env.push((QUIET_VAR.into(), "1".into()));
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_object_is_found_across_reads_strings_and_noise() {
        let mut f = FirstObject::default();
        assert_eq!(f.push(b"warning: noise }\n{\"a\": \"}{\\\"\","), None);
        assert_eq!(f.push(b" \"b\": {\"c\": 1}"), None);
        assert_eq!(
            f.push(b"}\n{\"second\": 2}"),
            Some(Some(json!({"a": "}{\"", "b": {"c": 1}})))
        );
        assert_eq!(f.push(b"{}"), None, "only the first");
        let mut bad = FirstObject::default();
        assert_eq!(bad.push(b"{\"a\": tru}"), Some(None));
    }

    #[test]
    fn an_object_over_the_bound_is_no_answer_and_one_at_it_is_read() {
        let at = format!("{{\"a\":\"{}\"}}", "x".repeat(STATUS_BYTES - 8));
        assert_eq!(at.len(), STATUS_BYTES);
        let mut f = FirstObject::default();
        assert!(matches!(f.push(at.as_bytes()), Some(Some(_))));
        let over = format!("{{\"a\":\"{}\"}}", "x".repeat(STATUS_BYTES - 7));
        let mut f = FirstObject::default();
        assert_eq!(f.push(over.as_bytes()), Some(None));
    }

    #[test]
    fn only_a_plan_login_is_ready() {
        let s = |v: Value| Status::of(&v);
        assert!(s(json!({"loggedIn": true, "authMethod": "claude.ai"})).ready());
        assert!(s(json!({"loggedIn": true, "authMethod": "oauth_token"})).ready());
        assert_eq!(
            s(json!({"loggedIn": false, "authMethod": "none"})),
            Status::NotLoggedIn
        );
        assert_eq!(
            s(json!({"loggedIn": true, "authMethod": "api_key"})),
            Status::OtherMethod("api_key".into())
        );
        assert_eq!(s(json!({"authMethod": "claude.ai"})), Status::NotLoggedIn);
    }
}

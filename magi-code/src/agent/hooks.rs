//! Runs the global settings' hooks around tool calls (`runner.md` 7): `/bin/sh -c` in the cwd,
//! in its own process group, the call as JSON on stdin, output read and discarded, at most
//! [`HOOK_RUN`] each (then the group is killed), stopped by the run's cancellation.

use super::emit::RunOutput;
use crate::config::Hook;
use crate::util::cancel::Cancel;
use crate::util::proc::{kill_group, shell_command, take_output};
use crate::wire::DiagnosticCode;
use serde_json::{json, Value};
use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one hook may run before its process group is killed.
pub const HOOK_RUN: Duration = Duration::from_secs(10);
/// Environment variable that shortens [`HOOK_RUN`] (milliseconds, 1–10,000) so tests need
/// not wait 10 s; it can never lengthen it.
pub const HOOK_RUN_ENV: &str = "MAGI_CODE_HOOK_RUN_MS";
/// What the model gets for a call a `pre_tool` hook blocked.
pub const BLOCKED: &str = "blocked by a hook";
/// The exit status with which a `pre_tool` hook blocks the call.
const BLOCK_STATUS: i32 = 2;
/// How often a running hook is polled.
const POLL: Duration = Duration::from_millis(10);

/// How one hook run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookEnd {
    /// The shell exited with this status and every pipe closed.
    Exit(i32),
    /// It failed otherwise: a short phrase (`timed out after 10 s`, `killed by signal 9`).
    Failed(String),
    /// The run's cancellation stopped it (its group was killed).
    Cancelled,
}

/// The bound of one hook run: [`HOOK_RUN`], or a shorter one from [`HOOK_RUN_ENV`].
#[must_use]
pub fn run_bound() -> Duration {
    static BOUND: OnceLock<Duration> = OnceLock::new();
    *BOUND.get_or_init(|| bound_from(std::env::var(HOOK_RUN_ENV).ok().as_deref()))
}

/// [`HOOK_RUN`] unless `v` is a whole number of milliseconds in 1–10,000.
fn bound_from(v: Option<&str>) -> Duration {
    v.and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_millis)
        .filter(|d| !d.is_zero() && *d <= HOOK_RUN)
        .unwrap_or(HOOK_RUN)
}

fn phrase_of(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("timed out after {} s", d.as_secs())
    } else {
        format!("timed out after {} ms", d.as_millis())
    }
}

/// Runs every `pre_tool` hook matching `tool`, in order, for a call policy and approval let
/// run. Returns why the call must not run: [`BLOCKED`] when one exits 2 (the rest are
/// skipped), `cancelled` when the run's cancellation stopped one; other failures are
/// `hook_failed` diagnostics and the call proceeds.
pub fn pre_tool(out: &mut RunOutput<'_>, tool: &str, input: &Value) -> Option<&'static str> {
    let hooks = &out.ctx.rt.settings.hooks.pre_tool;
    if !hooks.iter().any(|h| h.matches(tool)) {
        return None;
    }
    let stdin =
        json!({"event": "pre_tool", "tool": tool, "input": input, "session_id": out.session_id});
    for hook in hooks.iter().filter(|h| h.matches(tool)) {
        match run_hook(out, hook, &stdin) {
            HookEnd::Exit(0) => {}
            HookEnd::Exit(BLOCK_STATUS) => return Some(BLOCKED),
            HookEnd::Cancelled => return Some("cancelled"),
            end => failed(out, "pre_tool", &end),
        }
    }
    None
}

/// Runs every `post_tool` hook matching `tool`, in order, after a call that ran; `ok` is
/// whether it succeeded. Every failure (any nonzero exit included) is a `hook_failed`
/// diagnostic; a cancelled run skips the rest.
pub fn post_tool(out: &mut RunOutput<'_>, tool: &str, input: &Value, ok: bool) {
    let hooks = &out.ctx.rt.settings.hooks.post_tool;
    if !hooks.iter().any(|h| h.matches(tool)) {
        return;
    }
    let stdin = json!({"event": "post_tool", "tool": tool, "input": input, "session_id": out.session_id, "ok": ok});
    for hook in hooks.iter().filter(|h| h.matches(tool)) {
        match run_hook(out, hook, &stdin) {
            HookEnd::Exit(0) => {}
            HookEnd::Cancelled => return,
            end => failed(out, "post_tool", &end),
        }
    }
}

/// Whether any `post_tool` hook applies to `tool` (so the call's name and input are kept).
#[must_use]
pub fn has_post(out: &RunOutput<'_>, tool: &str) -> bool {
    out.ctx
        .rt
        .settings
        .hooks
        .post_tool
        .iter()
        .any(|h| h.matches(tool))
}

fn run_hook(out: &RunOutput<'_>, hook: &Hook, stdin: &Value) -> HookEnd {
    let bytes = stdin.to_string().into_bytes();
    run(
        &hook.command,
        &out.ctx.rt.cwd,
        bytes,
        run_bound(),
        out.ctx.cancel,
    )
}

/// The diagnostic never names the command or the input: either may hold a secret.
fn failed(out: &mut RunOutput<'_>, event: &str, end: &HookEnd) {
    let why = match end {
        HookEnd::Exit(code) => format!("exit {code}"),
        HookEnd::Failed(p) => p.clone(),
        HookEnd::Cancelled => "cancelled".to_owned(),
    };
    out.diagnostic(
        DiagnosticCode::HookFailed,
        &format!("a {event} hook failed ({why})"),
    );
}

/// Runs `command` with `/bin/sh -c` in `cwd` in its own process group, `stdin` written to it
/// and its output discarded, until the shell has exited and its pipes have closed, at most
/// `bound` (then, or on cancellation, the whole group is killed).
pub fn run(command: &str, cwd: &Path, stdin: Vec<u8>, bound: Duration, cancel: &Cancel) -> HookEnd {
    let end = Instant::now() + bound;
    let spawned = shell_command(command, cwd)
        .env_remove(HOOK_RUN_ENV)
        .stdin(Stdio::piped())
        .spawn();
    let Ok(mut child) = spawned else {
        return HookEnd::Failed("failed to start".to_owned());
    };
    let pid = child.id();
    let (tx, done) = mpsc::channel::<()>();
    let mut open = 0usize;
    let mut jobs: Vec<Box<dyn FnOnce() + Send>> = Vec::new();
    if let Some(mut w) = child.stdin.take() {
        // A hook that never reads its stdin gets EPIPE or a full pipe; neither is a failure.
        jobs.push(Box::new(move || {
            let _ = w.write_all(&stdin);
        }));
    }
    for mut r in take_output(&mut child) {
        // Read to the end in bounded memory and never shown: hook output is not the model's
        // nor the client's.
        jobs.push(Box::new(move || {
            let _ = io::copy(&mut r, &mut io::sink());
        }));
    }
    for job in jobs {
        let tx = tx.clone();
        let started = std::thread::Builder::new()
            .name("hook-pipe".to_owned())
            .spawn(move || {
                job();
                let _ = tx.send(());
            });
        if started.is_err() {
            stop(&mut child, pid);
            return HookEnd::Failed("failed to start".to_owned());
        }
        open += 1;
    }
    drop(tx);
    let status = loop {
        if let Some(e) = past(cancel, end, bound) {
            stop(&mut child, pid);
            return e;
        }
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(_) => {
                stop(&mut child, pid);
                return HookEnd::Failed("i/o error".to_owned());
            }
        }
        let _ = cancel.sleep(POLL.min(end.saturating_duration_since(Instant::now())));
    };
    // A process the hook left behind may hold its pipes: the hook lasts until they close,
    // within the same bound.
    while open > 0 {
        if let Some(e) = past(cancel, end, bound) {
            kill_group(pid);
            return e;
        }
        match done.recv_timeout(POLL) {
            Ok(()) => open -= 1,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    match (status.code(), status.signal()) {
        (Some(code), _) => HookEnd::Exit(code),
        (None, Some(sig)) => HookEnd::Failed(format!("killed by signal {sig}")),
        (None, None) => HookEnd::Failed("exited".to_owned()),
    }
}

fn past(cancel: &Cancel, end: Instant, bound: Duration) -> Option<HookEnd> {
    if cancel.is_cancelled() {
        Some(HookEnd::Cancelled)
    } else if Instant::now() >= end {
        Some(HookEnd::Failed(phrase_of(bound)))
    } else {
        None
    }
}

/// Kills the whole group and reaps the shell; the pipe threads end as the pipes close.
fn stop(child: &mut Child, pid: u32) {
    kill_group(pid);
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn go(cmd: &str, bound: Duration) -> HookEnd {
        let d = tempfile::tempdir().unwrap();
        run(cmd, d.path(), b"{}".to_vec(), bound, &Cancel::default())
    }

    /// Waits (bounded) until the process group whose ID the hook wrote to `dir/pgid` is gone.
    fn group_gone(dir: &Path) {
        let pgid: i64 = std::fs::read_to_string(dir.join("pgid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(2);
        loop {
            let alive = Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("kill -0 -- -{pgid} 2>/dev/null"))
                .status()
                .unwrap()
                .success();
            if !alive {
                return;
            }
            assert!(Instant::now() < end, "process group {pgid} still alive");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_bound_is_ten_seconds_and_only_shortens() {
        assert_eq!(HOOK_RUN, Duration::from_secs(10));
        assert_eq!(bound_from(None), HOOK_RUN);
        assert_eq!(bound_from(Some("1")), Duration::from_millis(1));
        assert_eq!(bound_from(Some("10000")), HOOK_RUN);
        for bad in ["0", "10001", "-5", "1.5", "", "soon"] {
            assert_eq!(bound_from(Some(bad)), HOOK_RUN, "{bad}");
        }
        assert_eq!(phrase_of(HOOK_RUN), "timed out after 10 s");
        assert_eq!(
            phrase_of(Duration::from_millis(300)),
            "timed out after 300 ms"
        );
    }

    #[test]
    fn exit_statuses_and_stdin() {
        assert_eq!(go("exit 0", HOOK_RUN), HookEnd::Exit(0));
        assert_eq!(go("exit 2", HOOK_RUN), HookEnd::Exit(2));
        assert_eq!(go("exit 7", HOOK_RUN), HookEnd::Exit(7));
        assert_eq!(
            go("kill -9 $$", HOOK_RUN),
            HookEnd::Failed("killed by signal 9".into())
        );
        assert_eq!(go(r#"[ "$(cat)" = "{}" ]"#, HOOK_RUN), HookEnd::Exit(0));
    }

    #[test]
    fn a_hook_within_its_bound_passes_and_one_past_it_is_killed_with_its_group() {
        let bound = Duration::from_millis(1_500);
        // Well inside the bound, loud on both pipes: output is drained, never blocking it.
        assert_eq!(
            go(
                "head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2; sleep 0.2",
                bound
            ),
            HookEnd::Exit(0)
        );
        let d = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let end = run(
            "echo $$ > pgid; sleep 30 & sleep 30",
            d.path(),
            Vec::new(),
            bound,
            &Cancel::default(),
        );
        assert_eq!(end, HookEnd::Failed("timed out after 1500 ms".into()));
        let took = t.elapsed();
        assert!(
            took >= bound && took < bound + Duration::from_secs(1),
            "{took:?}"
        );
        group_gone(d.path());
    }

    #[test]
    fn a_background_process_holding_the_pipes_runs_into_the_bound() {
        let bound = Duration::from_millis(400);
        assert_eq!(
            go("sleep 30 & exit 0", bound),
            HookEnd::Failed("timed out after 400 ms".into())
        );
    }

    #[test]
    fn cancellation_stops_a_running_hook_promptly() {
        let d = tempfile::tempdir().unwrap();
        let cancel = std::sync::Arc::new(Cancel::default());
        let c = std::sync::Arc::clone(&cancel);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            c.cancel();
        });
        let began = Instant::now();
        let end = run(
            "echo $$ > pgid; sleep 30",
            d.path(),
            Vec::new(),
            HOOK_RUN,
            &cancel,
        );
        t.join().unwrap();
        assert_eq!(end, HookEnd::Cancelled);
        assert!(began.elapsed() < Duration::from_secs(1));
        group_gone(d.path());
    }

    #[test]
    fn a_missing_cwd_fails_to_start() {
        let end = run(
            "true",
            Path::new("/nonexistent/hook/cwd"),
            Vec::new(),
            HOOK_RUN,
            &Cancel::default(),
        );
        assert_eq!(end, HookEnd::Failed("failed to start".into()));
    }

    #[test]
    fn a_hook_that_never_reads_a_large_stdin_still_ends() {
        let d = tempfile::tempdir().unwrap();
        let end = run(
            "exit 0",
            d.path(),
            vec![b'x'; 1 << 20],
            Duration::from_secs(5),
            &Cancel::default(),
        );
        assert_eq!(end, HookEnd::Exit(0));
    }
}

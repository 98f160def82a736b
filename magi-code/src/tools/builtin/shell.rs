//! `shell`: `/bin/sh -c` in the session cwd, in its own process group, killed whole on
//! timeout or cancellation, with both pipes drained and bounded.

use super::input::{invalid, ShellIn, SHELL_TIMEOUT_DEFAULT_MS, SHELL_TIMEOUT_MAX_MS};
use crate::tools::outcome::{
    bound_parts, one_line, ToolDetails, ToolOutcome, HALF_BYTES, OUTPUT_BYTES,
};
use crate::util::cancel::Cancel;
use crate::util::proc::{captured, drain, kill_group, shell_command, take_output, Capture};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the shell's state is polled.
const POLL: Duration = Duration::from_millis(10);
/// How long the pipes may stay open after the process group was killed.
const KILL_GRACE: Duration = Duration::from_millis(500);

pub(crate) fn shell(i: ShellIn, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let timeout_ms = i.timeout_ms.unwrap_or(SHELL_TIMEOUT_DEFAULT_MS);
    if !(1..=SHELL_TIMEOUT_MAX_MS).contains(&timeout_ms) {
        return invalid("timeout_ms must be 1..=600000");
    }
    let began = Instant::now();
    let deadline = began + Duration::from_millis(timeout_ms);
    let spawned = shell_command(&i.command, cwd).spawn();
    let Ok(mut child) = spawned else {
        return ToolOutcome::fail("failed to start");
    };
    let pid = child.id();
    let cap = Arc::new(Mutex::new(Capture::new(OUTPUT_BYTES, HALF_BYTES)));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut open = 0usize;
    for pipe in take_output(&mut child) {
        let (cap, tx) = (Arc::clone(&cap), done_tx.clone());
        let started = std::thread::Builder::new()
            .name("tool-shell-pipe".to_owned())
            .spawn(move || {
                drain(pipe, &cap);
                let _ = tx.send(());
            });
        if started.is_err() {
            kill_group(pid);
            let _ = child.wait();
            return ToolOutcome::fail("failed to start");
        }
        open += 1;
    }
    drop(done_tx);

    let status = loop {
        if cancel.is_cancelled() {
            return stop(&mut child, pid, &done_rx, open, &cap, "cancelled")
                .with(command(None, began));
        }
        if Instant::now() >= deadline {
            return stop(&mut child, pid, &done_rx, open, &cap, "timed out")
                .with(command(None, began));
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(_) => {
                return stop(&mut child, pid, &done_rx, open, &cap, "i/o error")
                    .with(command(None, began))
            }
        }
        let _ = cancel.sleep(POLL);
    };
    // The shell exited; a process it left behind may still hold the pipes, and the call
    // lasts until they close, within the same timeout and cancellation.
    while open > 0 {
        if cancel.is_cancelled() {
            return stop(&mut child, pid, &done_rx, open, &cap, "cancelled")
                .with(command(None, began));
        }
        if Instant::now() >= deadline {
            return stop(&mut child, pid, &done_rx, open, &cap, "timed out")
                .with(command(None, began));
        }
        match done_rx.recv_timeout(POLL) {
            Ok(()) => open -= 1,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let (ok, summary) = exit_summary(status);
    ToolOutcome {
        ok,
        summary: one_line(&summary),
        output: bounded_capture(&cap),
        details: command(status.code(), began),
    }
}

fn command(exit_code: Option<i32>, began: Instant) -> ToolDetails {
    let duration_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
    ToolDetails::Command {
        exit_code,
        duration_ms,
    }
}

fn exit_summary(status: ExitStatus) -> (bool, String) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (code == 0, format!("exit {code}")),
        (None, Some(sig)) => (false, format!("killed by signal {sig}")),
        (None, None) => (false, "exited".to_owned()),
    }
}

/// Kills the group, reaps the shell, lets the pipes close for a moment, and reports `phrase`
/// with whatever output was captured.
fn stop(
    child: &mut Child,
    pid: u32,
    done: &mpsc::Receiver<()>,
    mut open: usize,
    cap: &Mutex<Capture>,
    phrase: &str,
) -> ToolOutcome {
    kill_group(pid);
    let _ = child.wait();
    let grace = Instant::now() + KILL_GRACE;
    while open > 0 {
        let left = grace.saturating_duration_since(Instant::now());
        if left.is_zero() || done.recv_timeout(left).is_err() {
            // A process that left the group still holds a pipe; its reader ends with it.
            break;
        }
        open -= 1;
    }
    ToolOutcome {
        ok: false,
        summary: one_line(phrase),
        output: bounded_capture(cap),
        details: ToolDetails::None,
    }
}

/// Both pipes' output for the model: its first and last bytes when it was long.
fn bounded_capture(cap: &Mutex<Capture>) -> String {
    let c = captured(cap);
    bound_parts(&c.head, c.dropped, &c.tail, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::outcome::TRUNCATED;
    use serde_json::{json, Value};
    use std::fs;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    fn go(name: &str, input: Value, cwd: &Path) -> ToolOutcome {
        super::super::run_named(name, &input, cwd, &Cancel::default())
    }

    fn group_alive(pgid: i64) -> bool {
        let Ok(rd) = fs::read_dir("/proc") else {
            return false;
        };
        rd.flatten().any(|e| {
            let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
                return false;
            };
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            f.len() > 2 && f[0] != "Z" && f[2].parse::<i64>().ok() == Some(pgid)
        })
    }

    #[test]
    fn group_check_sees_a_live_group() {
        let mut child = Command::new("sleep")
            .arg("5")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = i64::from(child.id());
        assert!(group_alive(pgid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!group_alive(pgid));
    }

    fn wait_group_gone(pgid: i64) {
        let end = Instant::now() + Duration::from_secs(2);
        while group_alive(pgid) {
            assert!(Instant::now() < end, "process group {pgid} still alive");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn shell_exit_codes_and_output() {
        let d = tempfile::tempdir().unwrap();
        let o = go(
            "shell",
            json!({"command": "echo out; echo err >&2"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "exit 0"));
        assert!(
            o.output.contains("out\n") && o.output.contains("err\n"),
            "{}",
            o.output
        );
        let o = go("shell", json!({"command": "exit 3"}), d.path());
        assert_eq!(
            (o.ok, o.summary.as_str(), o.output.as_str()),
            (false, "exit 3", "")
        );
        let o = go("shell", json!({"command": "kill -9 $$"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (false, "killed by signal 9"));
        // Runs in cwd with stdin null.
        fs::write(d.path().join("here"), "").unwrap();
        let o = go("shell", json!({"command": "ls; cat"}), d.path());
        assert_eq!((o.ok, o.output.as_str()), (true, "here\n"));
        let o = go(
            "shell",
            json!({"command": "true"}),
            &d.path().join("missing"),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "failed to start"));
    }

    #[test]
    fn shell_output_is_bounded_and_drained() {
        let d = tempfile::tempdir().unwrap();
        // Far more than a pipe buffer on both pipes: the child must not block.
        let cmd = "head -c 300000 /dev/zero | tr '\\0' a; head -c 300000 /dev/zero | tr '\\0' b >&2; sleep 0.3; echo done";
        let start = Instant::now();
        let o = go(
            "shell",
            json!({"command": cmd, "timeout_ms": 20_000}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "exit 0"));
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(o.output.len() <= OUTPUT_BYTES);
        // Both ends are kept: the first stdout bytes and the last bytes, `done` among them.
        assert!(o.output.starts_with("aaaa"), "{}", &o.output[..10]);
        // Two threads read the two pipes; the pause lets stderr drain before `done`.
        assert!(o.output.ends_with("done\n"));
        assert!(o.output.contains(" bytes cut …]\n"));
        assert!(!o.output.contains(TRUNCATED));
    }

    #[test]
    fn shell_timeout_kills_the_group() {
        let d = tempfile::tempdir().unwrap();
        let start = Instant::now();
        let o = go(
            "shell",
            json!({"command": "echo $$; sleep 5 & sleep 5", "timeout_ms": 200}),
            d.path(),
        );
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "timed out"));
        let pgid: i64 = o.output.trim().parse().unwrap();
        wait_group_gone(pgid);
    }

    #[test]
    fn shell_waits_for_held_pipes_within_the_timeout() {
        let d = tempfile::tempdir().unwrap();
        let start = Instant::now();
        let o = go(
            "shell",
            json!({"command": "echo $$; sleep 5 &", "timeout_ms": 300}),
            d.path(),
        );
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!((o.ok, o.summary.as_str()), (false, "timed out"));
        wait_group_gone(o.output.trim().parse().unwrap());
        // A background process with its own output does not hold the call.
        let o = go(
            "shell",
            json!({"command": "echo $$; sleep 0.3 >/dev/null 2>&1 &", "timeout_ms": 5_000}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "exit 0"));
    }

    #[test]
    fn shell_cancel_from_another_thread() {
        let d = tempfile::tempdir().unwrap();
        let cancel = Cancel::default();
        let start = Instant::now();
        let o = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(150));
                cancel.cancel();
            });
            super::super::run(
                super::super::Builtin::Shell,
                &json!({"command": "echo $$; sleep 5"}),
                d.path(),
                &cancel,
            )
        });
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!((o.ok, o.summary.as_str()), (false, "cancelled"));
        wait_group_gone(o.output.trim().parse().unwrap());
        // Already cancelled: nothing runs.
        let o = super::super::run(
            super::super::Builtin::WriteFile,
            &json!({"path": "x", "content": ""}),
            d.path(),
            &cancel,
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "cancelled"));
        assert!(!d.path().join("x").exists());
    }
}

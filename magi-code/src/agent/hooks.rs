//! Runs one of the global settings' hooks around tool calls (`runner.md` 7; the run machine
//! decides which and when): `/bin/sh -c` in the cwd,
//! in its own process group, the call as JSON on stdin, output read and discarded, at most
//! [`HOOK_RUN`] each (then the group is killed), stopped by the run's cancellation.

use crate::util::cancel::Cancel;
use crate::util::clock::{Clock, Deadline};
use crate::util::proc::{kill_group, shell_command, take_output};
use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long one hook may run before its process group is killed.
pub const HOOK_RUN: Duration = Duration::from_secs(10);
pub use crate::run::HookEnd;
/// How often a running hook is polled.
const POLL: Duration = Duration::from_millis(10);

fn phrase_of(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("timed out after {} s", d.as_secs())
    } else {
        format!("timed out after {} ms", d.as_millis())
    }
}

/// Runs `command` with `/bin/sh -c` in `cwd` in its own process group, `stdin` written to it
/// and its output discarded, until the shell has exited and its pipes have closed, at most
/// `bound` on `clock` (then, or on cancellation, the whole group is killed).
pub fn run(
    command: &str,
    cwd: &Path,
    stdin: Vec<u8>,
    bound: Duration,
    cancel: &Cancel,
    clock: &dyn Clock,
) -> HookEnd {
    let end = Deadline::after(clock.now(), bound);
    let spawned = shell_command(command, cwd).stdin(Stdio::piped()).spawn();
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
        if let Some(e) = past(cancel, end, bound, clock.now()) {
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
        // A cancelled sleep is seen by `past` on the next turn.
        let _ = clock.sleep(POLL.min(end.left(clock.now())), cancel);
    };
    // A process the hook left behind may hold its pipes: the hook lasts until they close,
    // within the same bound.
    while open > 0 {
        if let Some(e) = past(cancel, end, bound, clock.now()) {
            kill_group(pid);
            return e;
        }
        match clock.recv(&done, POLL) {
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

/// Whether the hook must stop at `now`: cancelled, or its bound reached.
fn past(cancel: &Cancel, end: Deadline, bound: Duration, now: Instant) -> Option<HookEnd> {
    if cancel.is_cancelled() {
        Some(HookEnd::Cancelled)
    } else if end.passed(now) {
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
mod tests;

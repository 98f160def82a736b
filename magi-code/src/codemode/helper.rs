//! The backend's side of the helper (`code-mode.md` 4): starts `magi-code code-host` with the
//! secrets rule's environment, sends it a cell, answers its nested calls through a callback and
//! turns a crash, a hang past [`STOP_GRACE`] after an interrupt, or a protocol breach into a
//! failed (or interrupted) cell, killing the helper.

use super::protocol::{
    encode, CallAnswer, CallResult, Cell, CellState, DecodeError, Decoder, Done, FromHost,
    InterruptReason, Refusal, ToHost, LINE_BYTES,
};
use crate::util::cancel::Cancel;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::Value;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long an interrupted cell may take to end before its helper is killed.
pub const STOP_GRACE: Duration = Duration::from_millis(100);
/// How often the `poll` hook is asked for an interrupt while the helper works.
pub const POLL_EVERY: Duration = Duration::from_millis(5);

/// A nested call the code issued.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    /// Its number (unique over the helper's life).
    pub call: u64,
    /// The tool's name.
    pub name: String,
    /// The input as the code passed it: unchecked (`null` when the helper refused it).
    pub input: Value,
    /// Other calls of the same flush follow at once (they may run together).
    pub more: bool,
    /// Refused by the helper: recorded and answered with this error, never run.
    pub refused: Option<Refusal>,
}

/// How a cell ended, seen from the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellEnd {
    /// Its state.
    pub state: CellState,
    /// The output below the result's two header lines (`code-mode.md` 8).
    pub output: String,
    /// Nested calls the code sent (within `max_calls`, refused ones included).
    pub calls: u32,
    /// False when the helper was killed or died: drop it and start a new one next time.
    pub helper_alive: bool,
}

/// What the helper's stdout reader passes on.
#[derive(Debug)]
enum Heard {
    Message(FromHost),
    Breach(DecodeError),
    Exited,
    /// A deferred call's answer, from an [`Answerer`].
    Answer(u64, CallAnswer),
}

/// Answers deferred nested calls from any thread (calls the backend runs concurrently);
/// an answer to a call that is not waiting (its cell ended) is dropped.
#[derive(Debug, Clone)]
pub struct Answerer(Sender<Heard>);

impl Answerer {
    /// Gives call `call` its answer.
    pub fn answer(&self, call: u64, answer: CallAnswer) {
        // A helper dropped meanwhile has nobody left to answer.
        drop(self.0.send(Heard::Answer(call, answer)));
    }
}

/// How one call is handed to the backend: answered at once, or later through an [`Answerer`].
type OnCall<'a> = &'a mut dyn FnMut(CallRequest) -> Option<CallAnswer>;
/// Asked for an interrupt.
type Poll<'a> = &'a mut dyn FnMut() -> Option<InterruptReason>;

/// Cancelled by the helper's reader once the running cell ends on the helper's side (its
/// `done`, a breach or the helper's exit), even while the backend is busy with a call.
type EndWatch = Arc<Mutex<Option<Arc<Cancel>>>>;

/// A running `code-host` helper.
#[derive(Debug)]
pub struct Helper {
    ended: EndWatch,
    child: Child,
    to_helper: Option<Sender<Vec<u8>>>,
    from_helper: Receiver<Heard>,
    answers: Sender<Heard>,
    /// Deferred calls of the running cell still without an answer.
    deferred: BTreeSet<u64>,
    /// `call` lines of the running cell: its count when the helper is lost before `done`.
    calls_seen: u32,
    alive: bool,
}

impl Helper {
    /// Starts this executable as `code-host` with environment `env` (build it with
    /// [`crate::util::env::child_env`]).
    ///
    /// # Errors
    /// When the executable cannot be found or started.
    pub fn start(env: &[(OsString, OsString)]) -> io::Result<Self> {
        Self::start_exe(&std::env::current_exe()?, env)
    }

    /// Starts `exe code-host` (tests name the built binary).
    ///
    /// # Errors
    /// When `exe` cannot be started.
    pub fn start_exe(exe: &Path, env: &[(OsString, OsString)]) -> io::Result<Self> {
        // std opens every descriptor close-on-exec, so the child gets its three pipes only;
        // the helper also closes anything the backend itself inherited.
        let mut child = Command::new(exe)
            .arg("code-host")
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own group: a terminal's Ctrl-C reaches the backend, not the helper.
            .process_group(0)
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            kill_child(&mut child);
            return Err(io::Error::other("the helper's pipes are missing"));
        };
        let (to_tx, to_rx) = crossbeam_channel::unbounded::<Vec<u8>>();
        let (from_tx, from_rx) = crossbeam_channel::unbounded();
        let ended: EndWatch = Arc::default();
        let reader_ended = Arc::clone(&ended);
        let threads = std::thread::Builder::new()
            .name("code-host-in".into())
            .spawn(move || write_lines(stdin, &to_rx))
            .and_then(|_| {
                let from_tx = from_tx.clone();
                std::thread::Builder::new()
                    .name("code-host-out".into())
                    .spawn(move || read_lines(stdout, &from_tx, &reader_ended))
            });
        if let Err(e) = threads {
            kill_child(&mut child);
            return Err(e);
        }
        Ok(Self {
            ended,
            child,
            to_helper: Some(to_tx),
            from_helper: from_rx,
            answers: from_tx,
            deferred: BTreeSet::new(),
            calls_seen: 0,
            alive: true,
        })
    }

    /// The helper's process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the helper can take another cell.
    #[must_use]
    pub fn is_alive(&self) -> bool {
        self.alive
    }

    /// Kills the helper (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        self.alive = false;
        self.to_helper = None;
        kill_child(&mut self.child);
    }

    /// Cancels `c` as soon as the next cell ends on the helper's side (read as the helper
    /// says so, before the backend takes it), so that calls in flight can stop at once.
    pub fn on_cell_end(&self, c: Arc<Cancel>) {
        *self.ended.lock().unwrap_or_else(PoisonError::into_inner) = Some(c);
    }

    /// An [`Answerer`] for calls deferred by [`Helper::run_cell_deferred`].
    #[must_use]
    pub fn answerer(&self) -> Answerer {
        Answerer(self.answers.clone())
    }

    /// Runs `cell`: each nested call goes to `on_call` (one at a time, in issue order), and
    /// `poll` is asked every [`POLL_EVERY`] (and after each call) whether to interrupt.
    pub fn run_cell(
        &mut self,
        cell: &Cell,
        on_call: &mut dyn FnMut(CallRequest) -> CallAnswer,
        poll: Poll<'_>,
    ) -> CellEnd {
        self.run_cell_deferred(cell, &mut |r| Some(on_call(r)), poll)
    }

    /// [`Helper::run_cell`] where `on_call` may return `None` and answer later through
    /// [`Helper::answerer`], so that calls can run concurrently.
    pub fn run_cell_deferred(
        &mut self,
        cell: &Cell,
        on_call: OnCall<'_>,
        poll: Poll<'_>,
    ) -> CellEnd {
        self.deferred.clear();
        self.calls_seen = 0;
        if !self.alive {
            return self.lost(None, "the code helper is gone");
        }
        let line = encode(&ToHost::Cell(cell.clone()));
        if line.len() > LINE_BYTES {
            return CellEnd {
                state: CellState::Failed,
                output: "Error: the cell is over the helper's line bound".to_owned(),
                calls: 0,
                helper_alive: true,
            };
        }
        if !self.send(line) {
            return self.lost(None, "the code helper exited");
        }
        let mut interrupted: Option<(InterruptReason, Instant)> = None;
        loop {
            let wait = match interrupted {
                Some((_, at)) => STOP_GRACE.saturating_sub(at.elapsed()).min(POLL_EVERY),
                None => POLL_EVERY,
            };
            let heard = self.from_helper.recv_timeout(wait);
            if let Some(end) = self.hear(cell, heard, &mut interrupted, on_call, poll) {
                return end;
            }
            match interrupted {
                Some((r, at)) if at.elapsed() >= STOP_GRACE => {
                    let why = "the code helper did not stop within 100 ms and was killed";
                    return self.lost(Some(r), why);
                }
                Some(_) => {}
                None => {
                    if let Some(end) = self.interrupt(poll(), &mut interrupted) {
                        return end;
                    }
                }
            }
        }
    }

    /// Handles one thing heard from the helper; the cell's end when it ended.
    fn hear(
        &mut self,
        cell: &Cell,
        heard: Result<Heard, RecvTimeoutError>,
        interrupted: &mut Option<(InterruptReason, Instant)>,
        on_call: OnCall<'_>,
        poll: Poll<'_>,
    ) -> Option<CellEnd> {
        let reason = interrupted.map(|(r, _)| r);
        match heard {
            Ok(Heard::Message(FromHost::Done(d))) => Some(self.done(cell, d, reason)),
            // Calls after an interrupt are not run: the cell is ending.
            Ok(Heard::Message(FromHost::Call { .. })) if reason.is_some() => None,
            Ok(Heard::Message(FromHost::Call {
                call,
                name,
                input,
                more,
                refused,
            })) => {
                self.calls_seen = self.calls_seen.saturating_add(1);
                let request = CallRequest {
                    call,
                    name,
                    input,
                    more,
                    refused,
                };
                let Some(answer) = on_call(request) else {
                    self.deferred.insert(call);
                    return None;
                };
                self.give(call, answer, interrupted, poll)
            }
            Ok(Heard::Answer(call, answer)) => {
                if reason.is_some() || !self.deferred.remove(&call) {
                    return None;
                }
                self.give(call, answer, interrupted, poll)
            }
            Ok(Heard::Breach(e)) => {
                let why = match e {
                    DecodeError::LineTooLong => "a line over the bound".to_owned(),
                    DecodeError::Malformed(m) => m,
                };
                Some(self.lost(
                    reason,
                    &format!("the code helper broke the protocol: {why}"),
                ))
            }
            Ok(Heard::Exited) | Err(RecvTimeoutError::Disconnected) => {
                Some(self.lost(reason, "the code helper exited"))
            }
            Err(RecvTimeoutError::Timeout) => None,
        }
    }

    /// Sends a call's answer, or instead the interrupt that came while it ran.
    fn give(
        &mut self,
        call: u64,
        answer: CallAnswer,
        interrupted: &mut Option<(InterruptReason, Instant)>,
        poll: Poll<'_>,
    ) -> Option<CellEnd> {
        let r = poll();
        if r.is_some() {
            return self.interrupt(r, interrupted);
        }
        let sent = self.send(encode(&ToHost::Result(CallResult { call, answer })));
        (!sent).then(|| self.lost(None, "the code helper exited"))
    }

    /// Sends interrupt `r` (if any) and starts its grace; the cell's end if the helper is gone.
    fn interrupt(
        &mut self,
        r: Option<InterruptReason>,
        interrupted: &mut Option<(InterruptReason, Instant)>,
    ) -> Option<CellEnd> {
        let r = r?;
        *interrupted = Some((r, Instant::now()));
        let sent = self.send(encode(&ToHost::Interrupt { reason: r }));
        (!sent).then(|| self.lost(Some(r), "the code helper exited"))
    }

    fn send(&mut self, line: Vec<u8>) -> bool {
        self.to_helper
            .as_ref()
            .is_some_and(|tx| tx.send(line).is_ok())
    }

    fn done(&mut self, cell: &Cell, d: Done, interrupted: Option<InterruptReason>) -> CellEnd {
        if d.id != cell.id {
            return self.lost(interrupted, "the code helper broke the protocol");
        }
        CellEnd {
            state: d.state,
            output: d.output,
            calls: d.calls,
            helper_alive: true,
        }
    }

    /// Kills the helper and ends the cell: the interrupt's state if there was one, else failed.
    fn lost(&mut self, interrupted: Option<InterruptReason>, why: &str) -> CellEnd {
        self.kill();
        let state = match interrupted {
            Some(InterruptReason::Timeout) => CellState::TimedOut,
            Some(InterruptReason::Cancel) => CellState::Cancelled,
            None => CellState::Failed,
        };
        CellEnd {
            state,
            output: format!("Error: {why}"),
            calls: self.calls_seen,
            helper_alive: false,
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.kill();
    }
}

fn kill_child(child: &mut Child) {
    // Already dead (and maybe reaped) is fine: the wait below reaps or reports it.
    drop(child.kill());
    drop(child.wait());
}

fn write_lines(mut stdin: std::process::ChildStdin, rx: &Receiver<Vec<u8>>) {
    while let Ok(line) = rx.recv() {
        if stdin.write_all(&line).and_then(|()| stdin.flush()).is_err() {
            return;
        }
    }
}

/// Cancels the running cell's end watch, if any.
fn cell_ended(ended: &EndWatch) {
    let c = ended.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(c) = c {
        c.cancel();
    }
}

fn read_lines(mut stdout: std::process::ChildStdout, tx: &Sender<Heard>, ended: &EndWatch) {
    let mut decoder = Decoder::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stdout.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        decoder.push(&buf[..n]);
        while let Some(m) = decoder.next_message::<FromHost>() {
            let heard = match m {
                Ok(m) => Heard::Message(m),
                Err(e) => Heard::Breach(e),
            };
            let stop = matches!(heard, Heard::Breach(_));
            if matches!(heard, Heard::Message(FromHost::Done(_))) || stop {
                cell_ended(ended);
            }
            if tx.send(heard).is_err() || stop {
                return;
            }
        }
    }
    cell_ended(ended);
    // Nobody may listen any more; then there is no one to tell.
    drop(tx.send(Heard::Exited));
}

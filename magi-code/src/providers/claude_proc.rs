//! The Claude Code CLI's process for `claude-subscription` (`backend.md` "Claude through the
//! native CLI"): started with the CLI's environment in the session's folder, its stdout read
//! line by line on a thread of its own (bounded lines), ended by closing stdin, then SIGTERM,
//! then SIGKILL.

use super::claude_cli::{self as wire, FromCli};
use super::model::StepFailure;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a CLI whose stdin closed and that got SIGTERM may take before SIGKILL.
const END_GRACE: Duration = Duration::from_millis(100);

/// The most lines read ahead of the turn.
const LINES_AHEAD: usize = 1024;

/// Where a session keeps its CLI between turns (dropping the last holder ends it).
pub type CliSlot = Arc<Mutex<Option<CliProcess>>>;

/// What starts a CLI: its executable, environment and working folder.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The executable.
    pub command: String,
    /// Its whole environment (`cli_auth::cli_env`).
    pub env: Vec<(OsString, OsString)>,
    /// The session's working folder.
    pub cwd: PathBuf,
    /// The bytes a transcript fallback may take (the summary request's budget).
    pub transcript_budget: usize,
}

impl Launch {
    /// The CLI with `args`: its environment alone, in the session's folder, stdin and stdout
    /// piped, stderr discarded, in a process group of its own.
    #[must_use]
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.command);
        c.args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0);
        c
    }
}

/// What one read of the CLI's stdout was.
enum Line {
    Read(Vec<u8>),
    TooLong,
}

/// A running CLI: its process, its stdin, the lines its reader thread passes on, and the
/// conversation, model and effort it was started with.
pub struct CliProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    /// The CLI's conversation.
    pub uuid: String,
    /// The model and effort it runs.
    pub started_with: (String, Option<String>),
    next_id: u64,
}

impl std::fmt::Debug for CliProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliProcess")
            .field("pid", &self.child.id())
            .field("uuid", &self.uuid)
            .finish_non_exhaustive()
    }
}

impl Drop for CliProcess {
    fn drop(&mut self) {
        // EOF first: an idle CLI exits on its own; then the signals, then it is reaped.
        drop(self.stdin.take());
        let pid = self.child.id();
        crate::util::proc::term_group(pid);
        let end = Instant::now() + END_GRACE;
        while Instant::now() < end {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        crate::util::proc::kill_group(pid);
        drop(self.child.kill());
        drop(self.child.wait());
    }
}

/// Starts the CLI with `args` and a reader thread over its stdout.
///
/// # Errors
/// `Unreachable` when it cannot start.
pub fn spawn(
    launch: &Launch,
    args: &[String],
    uuid: String,
    started_with: (String, Option<String>),
) -> Result<CliProcess, StepFailure> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = launch
        .command(&args)
        .spawn()
        .map_err(|_| StepFailure::Unreachable)?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        drop(child.kill());
        drop(child.wait());
        return Err(StepFailure::Unreachable);
    };
    // Bounded: a CLI that writes faster than the turn reads waits on its own stdout.
    let (tx, lines) = crossbeam_channel::bounded(LINES_AHEAD);
    let reader = std::thread::Builder::new()
        .name("claude-out".into())
        .spawn(move || read_lines(stdout, &tx));
    if reader.is_err() {
        drop(child.kill());
        drop(child.wait());
        return Err(StepFailure::Unreachable);
    }
    Ok(CliProcess {
        child,
        stdin: Some(stdin),
        lines,
        uuid,
        started_with,
        next_id: 0,
    })
}

/// Passes on each line of `stdout` (without its LF) until EOF, or a line over
/// [`wire::LINE_BYTES`], which ends the reading.
fn read_lines(stdout: ChildStdout, tx: &crossbeam_channel::Sender<Line>) {
    let mut r = BufReader::new(stdout);
    loop {
        let mut buf = Vec::new();
        let bound = wire::LINE_BYTES as u64 + 1;
        match (&mut r).take(bound).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = if buf.ends_with(b"\n") {
            buf.pop();
            Line::Read(buf)
        } else if buf.len() > wire::LINE_BYTES {
            Line::TooLong
        } else {
            Line::Read(buf)
        };
        let stop = matches!(line, Line::TooLong);
        if tx.send(line).is_err() || stop {
            return;
        }
    }
}

impl CliProcess {
    /// Writes `bytes` (one line) to the CLI.
    ///
    /// # Errors
    /// `StreamInvalid` when the CLI no longer reads.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), StepFailure> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(StepFailure::StreamInvalid);
        };
        stdin
            .write_all(bytes)
            .and_then(|()| stdin.flush())
            .map_err(|_| StepFailure::StreamInvalid)
    }

    /// A new ID for a control request of the backend's.
    pub fn fresh_id(&mut self, head: &str) -> String {
        self.next_id += 1;
        format!("{head}-{}", self.next_id)
    }

    /// The next line within `wait`: `Ok(None)` when none came yet (or a blank one).
    ///
    /// # Errors
    /// `StreamInvalid` when the CLI ended or wrote a line that is not one of its own.
    pub fn next(&self, wait: Duration) -> Result<Option<FromCli>, StepFailure> {
        match self.lines.recv_timeout(wait) {
            Ok(Line::Read(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(None),
            Ok(Line::Read(bytes)) => wire::parse_line(&bytes)
                .map(Some)
                .map_err(|_| StepFailure::StreamInvalid),
            Ok(Line::TooLong) | Err(RecvTimeoutError::Disconnected) => {
                Err(StepFailure::StreamInvalid)
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
        }
    }

    /// The signals after an interrupt that gave no `result`: SIGINT, then SIGTERM a moment
    /// later (the process is then not kept; dropping it sends SIGKILL).
    pub fn signal_out(&mut self) {
        let pid = self.child.id();
        crate::util::proc::int_group(pid);
        let _ = self.next(Duration::from_millis(50));
        crate::util::proc::term_group(pid);
    }
}

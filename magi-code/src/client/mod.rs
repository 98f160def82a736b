//! A typed client of `magi-code serve --stdio`, for Rust frontends, `magi-code chat` and the
//! tests, built on the [`crate::wire`] types alone. The protocol's client rules are its easy
//! path (`docs/frontend-guide.md`, "Using the Rust client"):
//!
//! - request IDs are allocated by the client and never reused within a child ([`ids`]); an
//!   ID of the caller's choosing is refused if it was used before, and past `request_ids`
//!   IDs the client refuses rather than have the child close;
//! - responses correlate by ID, never by order, with events interleaved ([`inbox`]); every
//!   frame is checked (one `instance_id`, `seq` without gaps, known frame types and events,
//!   no response to a request never sent), and a violation fails the client closed;
//! - a [`Turn`] accumulates `message.delta` per message and replaces it by the reconciled
//!   text once the `last_part` arrives, never appending, and refuses anything after
//!   `run.finished`;
//! - [`Client::saved_session`] yields a session ID to save for a relaunch only after a
//!   durable acknowledgement (`input.persisted`, `selection.set`, a durable `session.open`).
//!
//! [`pipe`] is the level below: raw request lines and the bounded frame reader, for the demo,
//! the benchmark and tests that write deliberately wrong frames.
//!
//! ```no_run
//! use magi_code::client::{Client, ClientError, Update};
//! use magi_code::wire::requests::{ApprovalAnswerParams, EmptyParams};
//! use magi_code::wire::results::{RecordedResult, SessionResult};
//! use magi_code::wire::{Call, Event};
//! use std::time::Duration;
//!
//! fn main() -> Result<(), ClientError> {
//!     let mut cmd = Client::command("magi-code".as_ref());
//!     cmd.current_dir("/path/to/workspace").stderr(std::process::Stdio::null());
//!     let mut c = Client::spawn(cmd).map_err(|_| ClientError::Closed)?;
//!     c.initialize(&["session.create", "turn.start", "approval.answer", "shutdown"])?;
//!     let s: SessionResult = c.call(Call::SessionCreate(EmptyParams {}))?;
//!     assert_eq!(c.saved_session(), None); // lazy: nothing to save yet
//!
//!     let mut turn = c.start_turn(&s.session_id, "Create notes.txt saying hello.")?;
//!     while turn.finished().is_none() {
//!         let Some(e) = c.next_event(Duration::from_millis(100))? else { continue };
//!         match turn.apply(&e)? {
//!             Update::Delta { text, .. } => print!("{text}"), // live, best effort
//!             Update::Reconciled { text, shown, .. } => { /* replace `shown` by `text` */ }
//!             _ => {}
//!         }
//!         if let Event::ApprovalRequested(a) = e {
//!             let answer = ApprovalAnswerParams {
//!                 session_id: s.session_id.clone(),
//!                 run_id: a.run_id,
//!                 approval_id: a.approval_id,
//!                 allow: true,
//!             };
//!             let _: RecordedResult = c.call(Call::ApprovalAnswer(answer))?;
//!         }
//!         if let Some(sid) = c.saved_session() {
//!             let _ = sid; // durable now (after `input.persisted`): save it for a relaunch
//!         }
//!     }
//!     println!("\n{}", turn.text()); // every message's reconciled text, once
//!     c.shutdown(Duration::from_secs(5));
//!     Ok(())
//! }
//! ```

pub mod error;
pub mod ids;
pub mod inbox;
pub mod pipe;
pub mod results;
pub mod saved;
pub mod turn;
pub mod words;

pub use error::ClientError;
pub use results::MethodResult;
pub use turn::{Turn, TurnError, Update};

use crate::wire::requests::{EmptyParams, InitializeParams, TurnStartParams};
use crate::wire::results::{InitializeResult, TurnStartResult};
use crate::wire::{Call, Event, ResponseBody};
use inbox::{Arrived, Inbox};
use std::io::{self, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

/// How long a call waits for its response unless [`Client::set_wait`] says otherwise.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// One `serve --stdio` child: its pipes, a reader thread, the IDs and the inbox.
#[derive(Debug)]
pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<io::Result<String>>,
    inbox: Inbox,
    ids: ids::Ids,
    wait: Option<Duration>,
    broken: Option<ClientError>,
}

impl Client {
    /// The command running `exe serve --stdio` with stdin and stdout piped; add cwd, env and
    /// stderr (drain or discard it) before [`Client::spawn`].
    #[must_use]
    pub fn command(exe: &Path) -> Command {
        pipe::serve_command(exe)
    }

    /// Spawns `cmd` (from [`Client::command`]) and starts reading its stdout on a thread of
    /// its own, frame lines bounded by the output frame bound, so the child never stalls on
    /// a full pipe.
    pub fn spawn(mut cmd: Command) -> io::Result<Self> {
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        let (tx, lines) = mpsc::channel();
        std::thread::Builder::new()
            .name("client-stdout".to_owned())
            .spawn(move || {
                let mut frames = pipe::Frames::new(stdout);
                while let Some(line) = frames.next_line() {
                    let bad = line.is_err();
                    if tx.send(line).is_err() || bad {
                        break;
                    }
                }
            })?;
        Ok(Self {
            child,
            stdin,
            lines,
            inbox: Inbox::default(),
            ids: ids::Ids::default(),
            wait: Some(DEFAULT_WAIT),
            broken: None,
        })
    }

    /// Spawns this very binary as `serve --stdio`.
    pub fn spawn_self() -> io::Result<Self> {
        Self::spawn(Self::command(&std::env::current_exe()?))
    }

    /// How long a call waits for its response; `None` waits until the child goes.
    pub fn set_wait(&mut self, wait: Option<Duration>) {
        self.wait = wait;
    }

    /// `initialize` requiring `required`.
    pub fn initialize(&mut self, required: &[&str]) -> Result<InitializeResult, ClientError> {
        self.call(Call::Initialize(InitializeParams {
            required_capabilities: required.iter().map(|c| (*c).to_owned()).collect(),
            client_tools: None,
        }))
    }

    /// Sends `call` under a fresh ID and waits for its response, decoded as `R` (which must be
    /// this method's result type: asking for another is refused before anything is sent).
    pub fn call<R: MethodResult>(&mut self, call: Call) -> Result<R, ClientError> {
        let method = results::method_of(&call);
        if !R::fits(method) {
            return Err(ClientError::WrongResultType(method));
        }
        let id = self.send(call)?;
        self.response(&id)
    }

    /// Sends `call` under a fresh ID without waiting; returns the ID for
    /// [`response`](Self::response), [`try_response`](Self::try_response) or
    /// [`discard`](Self::discard).
    pub fn send(&mut self, call: Call) -> Result<String, ClientError> {
        let id = self.ids.fresh()?;
        self.write(&id, &call)?;
        Ok(id)
    }

    /// Sends `call` under an ID of the caller's choosing: refused (nothing written) when
    /// the ID was used before in this child, or is outside the ID grammar.
    pub fn send_with_id(&mut self, id: &str, call: Call) -> Result<(), ClientError> {
        self.ids.claim(id)?;
        self.write(id, &call)
    }

    /// Sends `call` whose response is not wanted (an approval answer, a cancel: the events
    /// tell the rest); it is dropped when it arrives.
    pub fn send_detached(&mut self, call: Call) -> Result<(), ClientError> {
        let id = self.send(call)?;
        self.inbox.discard(&id);
        Ok(())
    }

    fn write(&mut self, id: &str, call: &Call) -> Result<(), ClientError> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        let line = pipe::typed_request(id, call);
        let stdin = self.stdin.as_mut().ok_or(ClientError::Closed)?;
        self.inbox.sent(id, results::method_of(call));
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|_| ClientError::Closed)
    }

    /// Waits (at most the [`set_wait`](Self::set_wait) wait) for the response to `id`,
    /// queueing events that arrive meanwhile.
    pub fn response<R: MethodResult>(&mut self, id: &str) -> Result<R, ClientError> {
        let end = self.wait.map(|w| Instant::now() + w);
        loop {
            if let Some((method, body)) = self.inbox.take(id) {
                return decode(method, body);
            }
            if !self.inbox.waiting(id) {
                return Err(ClientError::Protocol("no such request outstanding"));
            }
            let left = end.map_or(Duration::from_secs(1), |e| {
                e.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return Err(ClientError::Timeout);
            }
            self.pump(left)?;
        }
    }

    /// The response to `id` if it arrived (reading only what is already there).
    pub fn try_response<R: MethodResult>(&mut self, id: &str) -> Option<Result<R, ClientError>> {
        while self.inbox.waiting(id) {
            match self.pump(Duration::ZERO) {
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
        self.inbox.take(id).map(|(m, body)| decode(m, body))
    }

    /// Drops the response to `id`, now or when it arrives.
    pub fn discard(&mut self, id: &str) {
        self.inbox.discard(id);
    }

    /// The next event within `timeout`: `Ok(None)` when none came (or a response came
    /// instead: look with [`try_response`](Self::try_response)).
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<Event>, ClientError> {
        if let Some(e) = self.inbox.pop_event() {
            return Ok(Some(e));
        }
        self.pump(timeout)?;
        Ok(self.inbox.pop_event())
    }

    /// Reads at most one line within `timeout` into the inbox.
    fn pump(&mut self, timeout: Duration) -> Result<Option<Arrived>, ClientError> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        let got = if timeout.is_zero() {
            self.lines.try_recv().map_err(|e| match e {
                TryRecvError::Empty => RecvTimeoutError::Timeout,
                TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            })
        } else {
            self.lines.recv_timeout(timeout)
        };
        let arrived = match got {
            Ok(Ok(line)) => self.inbox.push_line(&line),
            Ok(Err(_)) => Err(ClientError::Protocol(
                "a frame line over the bound, cut short or not UTF-8",
            )),
            Err(RecvTimeoutError::Timeout) => return Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(ClientError::Closed),
        };
        arrived.map(Some).inspect_err(|e| {
            // Fail closed: nothing after a violation (or the end) is trusted.
            self.broken = Some(e.clone());
        })
    }

    /// `turn.start` for `session_id`; on admission, the [`Turn`] of its run (feed it the
    /// events from [`next_event`](Self::next_event)).
    pub fn start_turn(&mut self, session_id: &str, prompt: &str) -> Result<Turn, ClientError> {
        let r: TurnStartResult = self.call(Call::TurnStart(TurnStartParams {
            session_id: session_id.to_owned(),
            prompt: prompt.to_owned(),
        }))?;
        Ok(Turn::new(&r.run_id))
    }

    /// The session ID to save for a relaunch: the attached session, once a durable
    /// acknowledgement arrived; `None` before (a lazy session does not survive the child).
    #[must_use]
    pub fn saved_session(&self) -> Option<&str> {
        self.inbox.saved().to_save()
    }

    /// The attached session, durable or not.
    #[must_use]
    pub fn attached_session(&self) -> Option<&str> {
        self.inbox.saved().attached_id()
    }

    /// The child's `instance_id`, once a frame arrived.
    #[must_use]
    pub fn instance_id(&self) -> Option<&str> {
        self.inbox.instance_id()
    }

    /// How many request IDs this child has had.
    #[must_use]
    pub fn ids_used(&self) -> usize {
        self.ids.used()
    }

    /// The child's process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin (EOF to the child: it cancels work, drains and exits).
    pub fn close(&mut self) {
        self.stdin = None;
    }

    /// SIGKILLs the child (a crash, stdin still open) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `shutdown`, waits at most `within` for its answer and the exit, killing the child
    /// past it; the exit code (1 when killed or gone by a signal).
    pub fn shutdown(&mut self, within: Duration) -> i32 {
        let end = Instant::now() + within;
        if let Ok(id) = self.send(Call::Shutdown(EmptyParams {})) {
            self.wait = Some(within);
            let _ = self.response::<serde_json::Value>(&id);
        }
        self.close();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status.code().unwrap_or(1),
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
                _ => {
                    self.kill();
                    return 1;
                }
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn decode<R: MethodResult>(method: &'static str, body: ResponseBody) -> Result<R, ClientError> {
    match body {
        ResponseBody::Error(e) => Err(ClientError::Rejected(e)),
        ResponseBody::Result(v) if R::fits(method) => {
            serde_json::from_value(v).map_err(|_| ClientError::BadResult(method))
        }
        ResponseBody::Result(_) => Err(ClientError::WrongResultType(method)),
    }
}

/// The params of the page after one that answered `cursor` and `complete` at `revision`; `None`
/// after the last page.
#[must_use]
pub fn next_page(
    revision: String,
    cursor: Option<String>,
    complete: bool,
) -> Option<crate::wire::requests::SnapshotPageParams> {
    let cursor = cursor.filter(|_| !complete)?;
    Some(crate::wire::requests::SnapshotPageParams {
        revision: Some(revision),
        cursor: Some(cursor),
        limit: None,
    })
}

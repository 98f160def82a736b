//! The mio event loop that drives a [`protocol_core::Engine`] over the inherited stdin/stdout
//! pipes: one ordered non-blocking writer, reads bounded by the engine's flow control, timers
//! from its deadlines, and a [`Waker`] for worker threads.
//!
//! Its `unsafe` is `fstat`/`fcntl` on fds 0 and 1 (`magi-code` has its own few sites, each
//! with its `SAFETY` comment; protocol-core forbids it).

use crossbeam_channel::{Receiver, Sender, TrySendError};
use mio::unix::pipe;
use mio::{Events, Interest, Poll, Token, Waker};
use protocol_core::trace::{header_line, record_line, Bytes, Step};
use protocol_core::{Engine, Output, Time, WorkerCommand, WorkerEvent};
use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

const STDIN: Token = Token(0);
const STDOUT: Token = Token(1);
const WAKE: Token = Token(2);

// Re-exported so the driver's own channel bound keeps its old path and can never drift from
// the advertised `worker_events`.
pub use protocol_core::limits::WORKER_EVENTS;

/// Why the launch check refused the standard streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchError {
    /// stdin is not a pipe.
    StdinNotPipe,
    /// stdout is not a pipe.
    StdoutNotPipe,
}

fn is_fifo(fd: RawFd) -> bool {
    // SAFETY: fstat writes into a zeroed stat buffer we own; an invalid fd returns -1.
    #[allow(unsafe_code)]
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFIFO
    }
}

/// Requires stdin and stdout to be pipes (FIFOs): TTYs, regular files, sockets and closed
/// descriptors are refused. Has no side effect.
pub fn launch_check() -> Result<(), LaunchError> {
    if !is_fifo(0) {
        return Err(LaunchError::StdinNotPipe);
    }
    if !is_fifo(1) {
        return Err(LaunchError::StdoutNotPipe);
    }
    Ok(())
}

/// Where workers send their events; wakes the loop after each send.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: Sender<WorkerEvent>,
    /// Replies made on the loop thread itself: never blocking, drained before `tx`.
    local: Sender<WorkerEvent>,
    waker: Arc<Waker>,
}

impl EventSink {
    /// Sends an event that must arrive (completions, terminal events), waiting for room.
    /// Returns false if the loop is gone.
    pub fn send(&self, ev: WorkerEvent) -> bool {
        let ok = self.tx.send(ev).is_ok();
        let _ = self.waker.wake();
        ok
    }

    /// Sends a critical event, waiting at most `wait` for room.
    pub fn send_timeout(&self, ev: WorkerEvent, wait: Duration) -> bool {
        let ok = self.tx.send_timeout(ev, wait).is_ok();
        let _ = self.waker.wake();
        ok
    }

    /// Sends an event from the loop thread itself (inside [`Backend::handle`]): never waits,
    /// because the loop is the channel's only reader and blocking here would stop it for good.
    /// Only for events answering a request (one each), so the queue is bounded by the
    /// requests the engine admits.
    pub fn reply(&self, ev: WorkerEvent) {
        let _ = self.local.send(ev);
        let _ = self.waker.wake();
    }

    /// Sends a best-effort event; dropped when the channel is full.
    pub fn try_send(&self, ev: WorkerEvent) -> bool {
        let r = self.tx.try_send(ev);
        let _ = self.waker.wake();
        !matches!(
            r,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_))
        )
    }
}

/// The backend behind the engine: runs worker commands off the protocol loop.
pub trait Backend {
    /// Starts or signals work; must not block the loop.
    fn handle(&mut self, cmd: WorkerCommand, sink: &EventSink);
}

/// Captures what the loop does as a replayable trace (`docs/trace-format.md`).
pub struct Recorder {
    out: Box<dyn Write + Send>,
    child: String,
}

impl Recorder {
    /// A recorder writing to `out`, labelling records with `child`.
    pub fn new(mut out: Box<dyn Write + Send>, child: &str, provenance: serde_json::Value) -> Self {
        let _ = out.write_all(header_line(provenance).as_bytes());
        Self {
            out,
            child: child.to_owned(),
        }
    }

    fn rec(&mut self, t: Time, step: Step) {
        let _ = self
            .out
            .write_all(record_line(&self.child, t.0, step).as_bytes());
    }
}

struct Fds {
    flags: [libc::c_int; 2],
}

impl Fds {
    fn save() -> Self {
        // SAFETY: F_GETFL on fds 0 and 1 reads flags only.
        #[allow(unsafe_code)]
        let flags = unsafe { [libc::fcntl(0, libc::F_GETFL), libc::fcntl(1, libc::F_GETFL)] };
        Self { flags }
    }

    fn restore(&self) {
        // O_NONBLOCK lives on the open file description, which the client may share:
        // restore what we found, best effort.
        for (fd, flags) in [0, 1].into_iter().zip(self.flags) {
            if flags >= 0 {
                // SAFETY: F_SETFL with previously read flags on a descriptor we still hold.
                #[allow(unsafe_code)]
                unsafe {
                    libc::fcntl(fd, libc::F_SETFL, flags);
                }
            }
        }
    }
}

/// Runs the loop until the engine exits; returns the exit code. Takes fds 0 and 1.
pub fn run(
    engine: Engine,
    backend: &mut dyn Backend,
    recorder: Option<Recorder>,
) -> io::Result<i32> {
    let saved = Fds::save();
    // SAFETY: fds 0 and 1 were checked to be pipes by the launch check and are taken exactly
    // once here; nothing else in the process uses them while serving.
    #[allow(unsafe_code)]
    let (stdin, stdout) = unsafe { (OwnedFd::from_raw_fd(0), OwnedFd::from_raw_fd(1)) };
    let mut rx = pipe::Receiver::from(stdin);
    let mut tx = pipe::Sender::from(stdout);
    rx.set_nonblocking(true)?;
    tx.set_nonblocking(true)?;
    let result = Loop::new(engine, recorder)?.run(&mut rx, &mut tx, backend);
    saved.restore();
    // Keep the descriptors open until process exit: closing fd 1 early could race a late
    // detached worker that must never write to it anyway.
    std::mem::forget(rx);
    std::mem::forget(tx);
    result
}

struct Loop {
    engine: Engine,
    poll: Poll,
    epoch: Instant,
    sink: EventSink,
    events_rx: Receiver<WorkerEvent>,
    local_rx: Receiver<WorkerEvent>,
    recorder: Option<Recorder>,
}

impl Loop {
    fn new(engine: Engine, mut recorder: Option<Recorder>) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let (tx, events_rx) = crossbeam_channel::bounded(WORKER_EVENTS);
        let (local, local_rx) = crossbeam_channel::unbounded();
        if let Some(r) = &mut recorder {
            r.rec(
                Time(0),
                Step::Start {
                    instance_id: engine.instance_id().to_owned(),
                },
            );
        }
        Ok(Self {
            engine,
            poll,
            epoch: Instant::now(),
            sink: EventSink { tx, local, waker },
            events_rx,
            local_rx,
            recorder,
        })
    }

    fn now(&self) -> Time {
        Time(u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    fn rec(&mut self, t: Time, step: Step) {
        if let Some(r) = &mut self.recorder {
            r.rec(t, step);
        }
    }

    fn run(
        mut self,
        rx: &mut pipe::Receiver,
        tx: &mut pipe::Sender,
        backend: &mut dyn Backend,
    ) -> io::Result<i32> {
        self.poll
            .registry()
            .register(rx, STDIN, Interest::READABLE)?;
        self.poll
            .registry()
            .register(tx, STDOUT, Interest::WRITABLE)?;
        let mut events = Events::with_capacity(16);
        let mut buf = vec![0u8; protocol_core::limits::READ_BATCH_BYTES];
        let mut pipes = Pipes {
            readable: true,
            writable: true,
            input_open: true,
        };
        loop {
            let now = self.now();
            // 1. Effects.
            if let Some(code) = self.effects(now, backend) {
                return Ok(code);
            }
            // 2. Reads, only while the engine has room (flow control); 3. the one ordered
            // writer, after reads so one write carries many frames; 4. worker events; then
            // the engine's timer.
            let progress = self.read(rx, &mut buf, &mut pipes, now)
                | self.write(tx, &mut pipes, now)
                | self.worker_events(now)
                | self.timer(now);
            if progress {
                continue;
            }
            // 5. Sleep until something happens.
            let timeout = self
                .engine
                .poll_timeout()
                .map(|d| Duration::from_millis(now.until(d).max(1)));
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for ev in &events {
                match ev.token() {
                    STDIN => pipes.readable = true,
                    STDOUT => pipes.writable = true,
                    _ => {}
                }
            }
        }
    }

    /// Carries out the engine's outputs; the exit code once it says to exit.
    fn effects(&mut self, now: Time, backend: &mut dyn Backend) -> Option<i32> {
        while let Some(out) = self.engine.poll_output() {
            match out {
                Output::Worker(cmd) => {
                    if self.recorder.is_some() {
                        self.rec(
                            now,
                            Step::Command {
                                command: cmd.clone(),
                            },
                        );
                    }
                    backend.handle(cmd, &self.sink);
                }
                Output::Exit { code } => {
                    self.rec(now, Step::Exit { code });
                    if let Some(r) = &mut self.recorder {
                        let _ = r.out.flush();
                    }
                    return Some(code);
                }
                // `Output` is non_exhaustive: outputs added later are ignored here.
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }
        None
    }

    /// Reads stdin while it is readable, open and the engine has room; whether anything
    /// happened.
    fn read(
        &mut self,
        rx: &mut pipe::Receiver,
        buf: &mut [u8],
        pipes: &mut Pipes,
        now: Time,
    ) -> bool {
        let mut progress = false;
        while pipes.readable && pipes.input_open && self.engine.wants_input() {
            match rx.read(buf) {
                Ok(n) if n > 0 => {
                    if self.recorder.is_some() {
                        self.rec(
                            now,
                            Step::In {
                                bytes: Bytes::from_slice(&buf[..n]),
                            },
                        );
                    }
                    self.engine.handle_input(&buf[..n], now);
                    progress = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => pipes.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The end of input, or a read that failed: the input is over either way.
                Ok(_) | Err(_) => {
                    pipes.input_open = false;
                    self.rec(now, Step::Eof);
                    self.engine.handle_eof(now);
                    let _ = self.poll.registry().deregister(rx);
                    progress = true;
                }
            }
        }
        progress
    }

    /// Writes the engine's pending bytes while stdout is writable; whether anything happened.
    fn write(&mut self, tx: &mut pipe::Sender, pipes: &mut Pipes, now: Time) -> bool {
        let mut progress = false;
        while pipes.writable {
            let Some(pending) = self.engine.pending_write() else {
                break;
            };
            match tx.write(pending) {
                Ok(n) => {
                    if self.recorder.is_some() {
                        let b = Bytes::from_slice(&pending[..n]);
                        self.rec(now, Step::Out { bytes: b });
                    }
                    self.engine.handle_written(n, now);
                    progress = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => pipes.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.rec(now, Step::OutError);
                    self.engine.handle_output_error(now);
                    pipes.writable = false;
                    progress = true;
                }
            }
        }
        progress
    }

    /// Hands the workers' events to the engine while it accepts them; whether any came.
    fn worker_events(&mut self, now: Time) -> bool {
        let mut progress = false;
        while self.engine.accepts_worker_event() {
            let Ok(ev) = self
                .local_rx
                .try_recv()
                .or_else(|_| self.events_rx.try_recv())
            else {
                break;
            };
            if self.recorder.is_some() {
                self.rec(now, Step::Worker { event: ev.clone() });
            }
            self.engine.handle_worker_event(ev, now);
            progress = true;
        }
        progress
    }

    /// Fires the engine's timer when it is due; whether it was.
    fn timer(&mut self, now: Time) -> bool {
        let due = self.engine.poll_timeout().is_some_and(|d| d <= now);
        if due {
            self.rec(now, Step::Timeout);
            self.engine.handle_timeout(now);
        }
        due
    }
}

/// What the loop knows of the pipes: stdin readable and still open, stdout writable.
struct Pipes {
    readable: bool,
    writable: bool,
    input_open: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_from_the_loop_thread_never_waits_for_room() {
        let poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), WAKE).unwrap());
        let (tx, rx) = crossbeam_channel::bounded(1);
        let (local, local_rx) = crossbeam_channel::unbounded();
        let sink = EventSink { tx, local, waker };
        assert!(sink.try_send(WorkerEvent::CleanupDone));
        assert!(
            !sink.try_send(WorkerEvent::CleanupDone),
            "the channel is full"
        );
        let t0 = Instant::now();
        for _ in 0..100 {
            sink.reply(WorkerEvent::CleanupDone);
        }
        assert!(t0.elapsed() < Duration::from_secs(1));
        assert_eq!(local_rx.try_iter().count(), 100);
        assert_eq!(rx.try_iter().count(), 1);
    }
}

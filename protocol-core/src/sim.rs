//! A deterministic harness around [`Engine`]: fake clock, in-memory pipes, optional automatic
//! worker answers. Property tests, replay and fuzz targets all drive the engine through it.
//!
//! Test support: compiled only with the `testing` feature, which the production binary leaves off.

use crate::engine::{Config, Engine, Output};
use crate::limits::READ_BATCH_BYTES;
use crate::time::Time;
use crate::worker::{ReadyView, WorkerCommand, WorkerEvent};
use serde_json::json;
use std::collections::VecDeque;

/// The instance ID simulated children use.
pub const SIM_INSTANCE_ID: &str = "00000000-0000-4000-8000-000000000001";

/// A context ID for simulated readiness.
pub const SIM_CONTEXT_ID: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A simulated ready view (provider `scripted`, model `echo`).
#[must_use]
pub fn ready_view() -> ReadyView {
    ReadyView {
        provider: Some("scripted".into()),
        model: Some("echo".into()),
        context_id: SIM_CONTEXT_ID.into(),
        session_id: None,
        selection: json!({
            "revision": "sel-1", "provider": "scripted", "model": "echo",
            "requested_effort": "default", "effective_effort": null,
            "effort_support": "unsupported", "permitted_efforts": ["default"],
        }),
    }
}

/// One simulated child with its pipes.
#[derive(Debug)]
pub struct Sim {
    /// The engine under test.
    pub engine: Engine,
    /// The fake clock.
    pub now: Time,
    /// Bytes the client wrote that the engine has not read yet (the input pipe).
    pub pipe_in: VecDeque<u8>,
    /// Whether the client closed its end once `pipe_in` is read.
    pub eof: bool,
    eof_delivered: bool,
    /// Whether the writer accepts nothing (a client that stopped reading).
    pub stalled: bool,
    /// Largest single write the simulated pipe accepts.
    pub write_chunk: usize,
    /// Every byte written to the output pipe.
    pub out: Vec<u8>,
    /// Commands handed to workers, in order.
    pub commands: Vec<WorkerCommand>,
    /// The exit code, once emitted.
    pub exit: Option<i32>,
    /// When set, `StartInit` is answered at once with this event.
    pub auto_init: Option<WorkerEvent>,
    /// Whether `Cleanup` is answered at once with `CleanupDone`.
    pub auto_cleanup: bool,
    /// Largest input buffered by the engine at any point.
    pub max_buffered_input: usize,
    /// Largest number of queued frames at any point.
    pub max_queued: usize,
}

impl Sim {
    /// A simulated child at time 0 whose workers answer at once (ready, clean).
    #[must_use]
    pub fn new() -> Self {
        Self::with_instance(SIM_INSTANCE_ID)
    }

    /// A simulated child with a chosen instance ID and no automatic worker answers.
    #[must_use]
    pub fn with_instance(instance_id: &str) -> Self {
        Self {
            engine: Engine::new(Config::default(), instance_id, Time(0)),
            now: Time(0),
            pipe_in: VecDeque::new(),
            eof: false,
            eof_delivered: false,
            stalled: false,
            write_chunk: usize::MAX,
            out: Vec::new(),
            commands: Vec::new(),
            exit: None,
            auto_init: Some(WorkerEvent::InitReady { view: ready_view() }),
            auto_cleanup: true,
            max_buffered_input: 0,
            max_queued: 0,
        }
    }

    /// The client writes `bytes`; the child runs until it can make no progress.
    pub fn send(&mut self, bytes: &[u8]) {
        self.pipe_in.extend(bytes);
        self.run();
    }

    /// The client closes its end of the input pipe.
    pub fn close_input(&mut self) {
        self.eof = true;
        self.run();
    }

    /// A worker reports `ev` now.
    pub fn worker(&mut self, ev: WorkerEvent) {
        self.engine.handle_worker_event(ev, self.now);
        self.run();
    }

    /// Advances the clock by `ms`, firing every deadline on the way at its own time.
    pub fn advance(&mut self, ms: u64) {
        let target = self.now.plus_ms(ms);
        while let Some(d) = self.engine.poll_timeout() {
            if d > target || self.exit.is_some() {
                break;
            }
            self.now = self.now.max(d);
            self.engine.handle_timeout(self.now);
            self.run();
        }
        self.now = target;
        self.run();
    }

    /// Output lines written so far, each without its LF.
    #[must_use]
    pub fn lines(&self) -> Vec<&[u8]> {
        let mut v: Vec<&[u8]> = self.out.split(|b| *b == b'\n').collect();
        v.pop();
        v
    }

    /// Output frames written so far, parsed.
    #[must_use]
    pub fn frames(&self) -> Vec<serde_json::Value> {
        self.lines()
            .iter()
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect()
    }

    /// Mutate-then-drain until nothing moves.
    pub fn run(&mut self) {
        loop {
            let mut progress = false;
            while let Some(o) = self.engine.poll_output() {
                progress = true;
                match o {
                    Output::Worker(cmd) => self.command(cmd),
                    Output::Exit { code } => self.exit = Some(code),
                    // `Output` is non_exhaustive: outputs added later are ignored here.
                    #[allow(unreachable_patterns)]
                    _ => {}
                }
            }
            self.max_queued = self.max_queued.max(self.engine.queued_frames());
            if !self.stalled {
                if let Some(p) = self.engine.pending_write() {
                    let n = p.len().min(self.write_chunk);
                    self.out.extend_from_slice(&p[..n]);
                    self.engine.handle_written(n, self.now);
                    progress = true;
                }
            }
            if self.engine.wants_input() {
                if !self.pipe_in.is_empty() {
                    let n = self.pipe_in.len().min(READ_BATCH_BYTES);
                    let batch: Vec<u8> = self.pipe_in.drain(..n).collect();
                    self.engine.handle_input(&batch, self.now);
                    progress = true;
                } else if self.eof && !self.eof_delivered {
                    self.eof_delivered = true;
                    self.engine.handle_eof(self.now);
                    progress = true;
                }
            }
            self.max_buffered_input = self.max_buffered_input.max(self.engine.buffered_input());
            if !progress {
                break;
            }
        }
    }

    fn command(&mut self, cmd: WorkerCommand) {
        self.commands.push(cmd.clone());
        match cmd {
            WorkerCommand::StartInit { .. } => {
                if let Some(ev) = self.auto_init.clone() {
                    self.engine.handle_worker_event(ev, self.now);
                }
            }
            WorkerCommand::Cleanup if self.auto_cleanup => {
                self.engine
                    .handle_worker_event(WorkerEvent::CleanupDone, self.now);
            }
            _ => {}
        }
    }
}

impl Default for Sim {
    fn default() -> Self {
        Self::new()
    }
}

/// A request frame with the protocol envelope, LF-terminated.
#[must_use]
pub fn request(id: &str, method: &str, params: &serde_json::Value) -> Vec<u8> {
    let mut v = serde_json::to_vec(&json!({
        "protocol": "magi-code.local-agent", "version": 1, "id": id, "method": method, "params": params,
    }))
    .unwrap_or_default();
    v.push(b'\n');
    v
}

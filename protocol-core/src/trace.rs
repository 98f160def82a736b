//! Trace records and deterministic replay (`docs/trace-format.md`).
//!
//! A trace is JSONL: a header, then one record per driver step of each child, in the order
//! the driver performed them. Replay feeds client bytes, EOF, worker events and timer firings
//! to a fresh engine per child at the recorded times and checks every write, command and the
//! exit code against the record.

use crate::engine::{Config, Engine, Output};
use crate::time::Time;
use crate::worker::{WorkerCommand, WorkerEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The `trace` value of a header record.
pub const TRACE_KIND: &str = "magi-code.local-agent.trace";

/// The first line of a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Always [`TRACE_KIND`].
    pub trace: String,
    /// Format version, 1.
    pub version: u64,
    /// Where the trace came from: tool, date, what it covers.
    pub provenance: Value,
}

/// Bytes as text when they are UTF-8, hex otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bytes {
    /// Exact UTF-8 text.
    Text(String),
    /// Lowercase hex of arbitrary bytes.
    Hex(String),
}

impl Bytes {
    /// Encodes bytes, as text when they are valid UTF-8.
    #[must_use]
    pub fn from_slice(b: &[u8]) -> Self {
        match std::str::from_utf8(b) {
            Ok(s) => Self::Text(s.to_owned()),
            Err(_) => Self::Hex(b.iter().map(|x| format!("{x:02x}")).collect()),
        }
    }

    /// Decodes to bytes; `None` on bad hex.
    #[must_use]
    pub fn to_vec(&self) -> Option<Vec<u8>> {
        match self {
            Self::Text(s) => Some(s.as_bytes().to_vec()),
            Self::Hex(h) => {
                if h.len() % 2 != 0 {
                    return None;
                }
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
                    .collect()
            }
        }
    }
}

/// What happened at one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dir", rename_all = "snake_case")]
pub enum Step {
    /// The child started with this instance ID.
    Start {
        /// The recorded instance ID.
        instance_id: String,
    },
    /// The driver read these client bytes (one batch).
    In {
        /// The batch.
        #[serde(flatten)]
        bytes: Bytes,
    },
    /// The driver read EOF.
    Eof,
    /// A worker event was handed to the engine.
    Worker {
        /// The event.
        event: WorkerEvent,
    },
    /// The engine emitted this worker command.
    Command {
        /// The command.
        command: WorkerCommand,
    },
    /// The pipe accepted these output bytes (a whole frame, several, or part of one).
    Out {
        /// The bytes written.
        #[serde(flatten)]
        bytes: Bytes,
    },
    /// Writing failed.
    OutError,
    /// The driver called `handle_timeout`.
    Timeout,
    /// The engine asked to exit with this code.
    Exit {
        /// The code.
        code: i32,
    },
}

/// One trace record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Which child (several children may share one trace).
    pub child: String,
    /// Milliseconds since the child started.
    pub t_ms: u64,
    /// The step.
    #[serde(flatten)]
    pub step: Step,
}

/// A difference between a recording and its replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// 1-based line of the trace where it showed.
    pub line: usize,
    /// What differs (no secrets: traces are test material).
    pub what: String,
}

/// The outcome of a replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Records replayed.
    pub records: usize,
    /// Children replayed.
    pub children: usize,
    /// Differences found; empty means the replay matched.
    pub mismatches: Vec<Mismatch>,
}

/// The instance ID replayed engines run with: recorded IDs are random by design, so they are
/// compared by shape (a UUID) and consistency (every frame of a child carries the one its
/// `start` record names), not by value.
pub const REPLAY_INSTANCE_ID: &str = "00000000-0000-4000-8000-00000000beef";

/// Whether `s` is shaped like a hyphenated UUID.
#[must_use]
pub fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                b == b'-'
            } else {
                b.is_ascii_hexdigit()
            }
        })
}

struct Child {
    engine: Engine,
    commands: std::collections::VecDeque<WorkerCommand>,
    exit: Option<i32>,
    recorded_instance: String,
    /// Recorded and replayed output bytes not yet compared (an incomplete last frame).
    recorded: Vec<u8>,
    replayed: Vec<u8>,
}

impl Child {
    fn drain(&mut self) {
        while let Some(o) = self.engine.poll_output() {
            match o {
                Output::Worker(c) => self.commands.push_back(c),
                Output::Exit { code } => self.exit = Some(code),
                // `Output` is non_exhaustive: outputs added later are ignored here.
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }
    }
}

/// Replays a whole trace text.
#[must_use]
pub fn replay(text: &str) -> Report {
    let mut report = Report::default();
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, l)) => match serde_json::from_str::<Header>(l) {
            Ok(h) if h.trace == TRACE_KIND && h.version == 1 => {}
            _ => report.mismatches.push(bad(1, "bad header")),
        },
        None => report.mismatches.push(bad(1, "empty trace")),
    }
    let mut children: BTreeMap<String, Child> = BTreeMap::new();
    for (i, l) in lines {
        let line = i + 1;
        // Several children appending to one capture file each write a header.
        if serde_json::from_str::<Header>(l).is_ok() {
            continue;
        }
        let rec: Record = match serde_json::from_str(l) {
            Ok(r) => r,
            Err(_) => {
                report.mismatches.push(bad(line, "unparsable record"));
                continue;
            }
        };
        report.records += 1;
        let now = Time(rec.t_ms);
        if let Step::Start { instance_id } = &rec.step {
            if !is_uuid(instance_id) {
                report
                    .mismatches
                    .push(bad(line, "recorded instance_id is not a UUID"));
            }
            children.insert(rec.child.clone(), Child::start(instance_id, now));
            continue;
        }
        let Some(c) = children.get_mut(&rec.child) else {
            report
                .mismatches
                .push(bad(line, "record before the child's start"));
            continue;
        };
        report.mismatches.extend(c.step(rec.step, line, now));
        c.drain();
    }
    report.children = children.len();
    report
}

/// A mismatch at `line`.
fn bad(line: usize, what: &str) -> Mismatch {
    Mismatch {
        line,
        what: what.to_owned(),
    }
}

impl Child {
    /// A replayed child whose recording started with `instance_id`.
    fn start(instance_id: &str, now: Time) -> Self {
        Self {
            engine: Engine::new(Config::default(), REPLAY_INSTANCE_ID, now),
            commands: Default::default(),
            exit: None,
            recorded_instance: instance_id.to_owned(),
            recorded: Vec::new(),
            replayed: Vec::new(),
        }
    }

    /// Replays one recorded step at trace line `line`; what differed.
    fn step(&mut self, step: Step, line: usize, now: Time) -> Vec<Mismatch> {
        let mut out = Vec::new();
        match step {
            Step::Start { .. } => {}
            Step::In { bytes } => match bytes.to_vec() {
                Some(b) if self.engine.wants_input() => self.engine.handle_input(&b, now),
                Some(_) => out.push(bad(line, "engine did not want input here")),
                None => out.push(bad(line, "bad hex")),
            },
            Step::Eof => self.engine.handle_eof(now),
            Step::Worker { event } => self.engine.handle_worker_event(event, now),
            Step::Timeout => self.engine.handle_timeout(now),
            Step::OutError => self.engine.handle_output_error(now),
            Step::Command { command } => {
                self.drain();
                match self.commands.pop_front() {
                    Some(got) if got == command => {}
                    Some(got) => out.push(bad(
                        line,
                        &format!(
                            "command differs: got {}",
                            serde_json::to_string(&got).unwrap_or_default()
                        ),
                    )),
                    None => out.push(bad(line, "expected command was not emitted")),
                }
            }
            Step::Out { bytes } => {
                self.drain();
                let Some(want) = bytes.to_vec() else {
                    out.push(bad(line, "bad hex"));
                    return out;
                };
                let got = self.engine.pending_write().unwrap_or_default();
                let n = want.len().min(got.len());
                if n < want.len() {
                    out.push(bad(
                        line,
                        "the engine had less output pending than was recorded",
                    ));
                }
                self.replayed.extend_from_slice(&got[..n]);
                self.recorded.extend_from_slice(&want);
                self.engine.handle_written(n, now);
                out.extend(compare_frames(self).iter().map(|w| bad(line, w)));
            }
            Step::Exit { code } => {
                self.drain();
                if self.exit != Some(code) {
                    let what = format!("exit differs: got {:?}, want {code}", self.exit);
                    out.push(bad(line, &what));
                }
            }
        }
        out
    }
}

/// Compares the complete frames seen so far: equal bytes once the recorded instance ID is
/// replaced by the replay one, which it must be everywhere (consistency).
fn compare_frames(c: &mut Child) -> Vec<String> {
    let mut out = Vec::new();
    let rec_id = c.recorded_instance.as_bytes();
    while let Some(end) = c.recorded.iter().position(|b| *b == b'\n') {
        let rec: Vec<u8> = c.recorded.drain(..=end).collect();
        let act: Vec<u8> = c
            .replayed
            .drain(..(end + 1).min(c.replayed.len()))
            .collect();
        let mut normalized = rec.clone();
        let mut i = 0;
        while let Some(p) = normalized[i..]
            .windows(rec_id.len().max(1))
            .position(|w| w == rec_id)
        {
            let at = i + p;
            normalized[at..at + rec_id.len()].copy_from_slice(REPLAY_INSTANCE_ID.as_bytes());
            i = at + rec_id.len();
        }
        let marker = b"\"instance_id\":\"";
        let consistent = normalized
            .windows(marker.len())
            .position(|w| w == marker)
            .is_none_or(|p| {
                normalized[p + marker.len()..].starts_with(REPLAY_INSTANCE_ID.as_bytes())
            });
        if !consistent {
            out.push("a frame carries another instance_id than its child's start record".into());
        } else if normalized != act {
            let shown = String::from_utf8_lossy(&act[..act.len().min(200)]).into_owned();
            out.push(format!("output differs: got {shown:?}"));
        }
    }
    out
}

/// Serializes one record as a trace line (LF included).
#[must_use]
pub fn record_line(child: &str, t_ms: u64, step: Step) -> String {
    let mut s = serde_json::to_string(&Record {
        child: child.to_owned(),
        t_ms,
        step,
    })
    .unwrap_or_default();
    s.push('\n');
    s
}

/// A header line (LF included).
#[must_use]
pub fn header_line(provenance: Value) -> String {
    let mut s = serde_json::to_string(&Header {
        trace: TRACE_KIND.into(),
        version: 1,
        provenance,
    })
    .unwrap_or_default();
    s.push('\n');
    s
}

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

struct Child {
    engine: Engine,
    commands: std::collections::VecDeque<WorkerCommand>,
    exit: Option<i32>,
}

impl Child {
    fn drain(&mut self) {
        while let Some(o) = self.engine.poll_output() {
            match o {
                Output::Worker(c) => self.commands.push_back(c),
                Output::Exit { code } => self.exit = Some(code),
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
    let bad = |line: usize, what: &str| Mismatch {
        line,
        what: what.to_owned(),
    };
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
            children.insert(
                rec.child.clone(),
                Child {
                    engine: Engine::new(Config::default(), instance_id, now),
                    commands: Default::default(),
                    exit: None,
                },
            );
            continue;
        }
        let Some(c) = children.get_mut(&rec.child) else {
            report
                .mismatches
                .push(bad(line, "record before the child's start"));
            continue;
        };
        match rec.step {
            Step::Start { .. } => {}
            Step::In { bytes } => match bytes.to_vec() {
                Some(b) if c.engine.wants_input() => c.engine.handle_input(&b, now),
                Some(_) => report
                    .mismatches
                    .push(bad(line, "engine did not want input here")),
                None => report.mismatches.push(bad(line, "bad hex")),
            },
            Step::Eof => c.engine.handle_eof(now),
            Step::Worker { event } => c.engine.handle_worker_event(event, now),
            Step::Timeout => c.engine.handle_timeout(now),
            Step::OutError => c.engine.handle_output_error(now),
            Step::Command { command } => {
                c.drain();
                match c.commands.pop_front() {
                    Some(got) if got == command => {}
                    Some(got) => report.mismatches.push(bad(
                        line,
                        &format!(
                            "command differs: got {}",
                            serde_json::to_string(&got).unwrap_or_default()
                        ),
                    )),
                    None => report
                        .mismatches
                        .push(bad(line, "expected command was not emitted")),
                }
            }
            Step::Out { bytes } => {
                c.drain();
                let Some(want) = bytes.to_vec() else {
                    report.mismatches.push(bad(line, "bad hex"));
                    continue;
                };
                let got = c.engine.pending_write().unwrap_or_default();
                if got.starts_with(&want) {
                    c.engine.handle_written(want.len(), now);
                } else {
                    let n = want.len().min(got.len());
                    report.mismatches.push(bad(
                        line,
                        &format!(
                            "output differs: got {:?}",
                            String::from_utf8_lossy(&got[..n.max(got.len().min(200))])
                        ),
                    ));
                    // Resynchronise on the recorded write so later records still check.
                    c.engine.handle_written(n, now);
                }
            }
            Step::Exit { code } => {
                c.drain();
                if c.exit != Some(code) {
                    report.mismatches.push(bad(
                        line,
                        &format!("exit differs: got {:?}, want {code}", c.exit),
                    ));
                }
            }
        }
        c.drain();
    }
    report.children = children.len();
    report
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

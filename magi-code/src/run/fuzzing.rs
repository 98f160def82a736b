//! Entry point of the `run` cargo-fuzz target (`fuzz/`), behind the `testing` feature: any
//! sequence of inputs, well-formed or not, in any order, fed to one run. The machine must
//! never panic, must emit at most one [`Output::Finished`] and nothing after it, and once
//! cancelled it must finish when its driver then answers honestly.

use super::cell::reachable;
use super::io::{CodeConfig, Config, HookEnd, Idle, Input, Output, Policies, Stored, ToolEnd};
use super::machine::Run;
use crate::codemode::decl::{exec_input_schema, exec_spec};
use crate::codemode::text::{summary, CellState, ToolErrorCode};
use crate::config::code_mode::CodePolicies;
use crate::config::{Hook, Hooks, Policy};
use crate::history::compact::Snapshot;
use crate::history::room::Room;
use crate::history::Item;
use crate::mcp::Lost;
use crate::providers::model::{StopReason, Usage};
use crate::providers::{ModelEvent, StepFailure};
use crate::tools::{ToolDetails, ToolKind, ToolOutcome, ToolRegistry};
use crate::util::schema;
use crate::wire::events::MessageDeltaData;
use protocol_core::{ClientToolDef, ErrorCode};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// Most tool calls the fuzz driver streams in one step: Anthropic's bound on a step's content
/// blocks, the largest any wire API allows (the calls move as a loop, so thousands answered
/// at once keep a flat stack).
pub const FUZZ_STEP_CALLS: usize = crate::providers::anthropic::BLOCKS;

/// The client tool the fuzz and test configurations offer.
pub const CLIENT_TOOL: &str = "ask_client";

/// A run's configuration for tests and fuzzing: the built-ins and one client tool, reads
/// allowed, writes and the shell asked, `window` tokens of context.
#[must_use]
pub fn config(window: u64, hooks: Hooks) -> Config {
    let mut tools = ToolRegistry::builtin();
    tools
        .add_client(&ClientToolDef {
            name: CLIENT_TOOL.into(),
            description: "asks the client".into(),
            input_schema: json!({"type": "object"}),
        })
        .expect("a valid client tool");
    Config {
        session_id: "s_fuzz".into(),
        run_id: "00000000-0000-4000-8000-000000000001".into(),
        record_session: "s_fuzz".into(),
        quiet: false,
        seed: 7,
        prompt: "do the thing".into(),
        history: Snapshot::default(),
        provider: "fuzz".into(),
        fixed_bytes: 400,
        max_output_tokens: 1_000,
        max_steps: 8,
        context_window: window,
        tools: Arc::new(tools),
        policies: Policies {
            read: Policy::Allow,
            write: Policy::Ask,
            shell: Policy::Ask,
            client: Policy::Allow,
            mcp: Policy::Ask,
            task: Policy::Allow,
            code: Policy::Allow,
        },
        hooks,
        tool_cards: true,
        tool_details: true,
        cwd: PathBuf::from("/w"),
        left_out: None,
        code: None,
    }
}

/// `cfg` with `exec` offered (class `code`, allowed directly) and Code Mode configured:
/// nested calls under `policies`, at most `max_calls` a cell, `timeout_ms` of wall clock.
#[must_use]
pub fn with_code(
    mut cfg: Config,
    policies: CodePolicies,
    max_calls: u32,
    timeout_ms: u64,
) -> Config {
    let mut table: ToolRegistry = (*cfg.tools).clone();
    let spec = exec_spec(table.specs());
    table
        .add(
            spec,
            ToolKind::Code,
            schema::compile(&exec_input_schema()),
            |_, input| summary(input["code"].as_str().unwrap_or_default()),
        )
        .expect("exec is a valid name, offered once");
    cfg.code = Some(CodeConfig {
        policies,
        timeout_ms,
        cpu_ms: 10_000,
        memory_mib: 64,
        max_calls,
        tools: reachable(&table),
    });
    cfg.tools = Arc::new(table);
    cfg
}

/// A successful tool outcome.
#[must_use]
pub fn ran(output: &str) -> ToolOutcome {
    ToolOutcome {
        ok: true,
        summary: "ran".into(),
        output: output.into(),
        details: ToolDetails::None,
    }
}

/// The driver-run action the machine asked for last and has not had answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Append,
    Step,
    Summary,
    Hook,
    Tools(usize),
}

/// Reads the fuzz input a byte at a time (zeros past its end).
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn done(&self) -> bool {
        self.at >= self.data.len()
    }

    fn text(&mut self) -> String {
        let n = usize::from(self.byte() % 24);
        let end = (self.at + n).min(self.data.len());
        let s = String::from_utf8_lossy(&self.data[self.at.min(end)..end]).into_owned();
        self.at += n;
        s
    }
}

/// The fuzz driver: the run, what it asked for, and what it said.
struct Fuzz {
    run: Run,
    now: u64,
    pending: Option<Pending>,
    finished: usize,
    approvals: Vec<String>,
    calls: Vec<String>,
    stored: u64,
    /// Tool calls streamed since the last step request.
    step_calls: usize,
    /// A cell is out and has not been ended.
    cell_open: bool,
    /// Nested calls issued (their numbers).
    code_calls: u64,
    /// `exec` is offered: the tool not offered becomes a well-formed `exec` call.
    code: bool,
    /// What the run waited for after the last drain.
    idle: Option<Idle>,
    /// A step streams (its calls back may ask for other actions meanwhile).
    streaming: bool,
}

impl Fuzz {
    fn feed(&mut self, input: Input) {
        self.run.handle(input, self.now);
        self.drain();
    }

    /// Takes every output, checking nothing follows the one `Finished` and every drain ends
    /// with one `Idle` (what the run waits for), kept for the next input.
    fn drain(&mut self) {
        while let Some(o) = self.run.poll_output() {
            assert_eq!(self.finished, 0, "an output after Finished: {o:?}");
            match o {
                Output::Idle(idle) => {
                    self.idle = Some(idle);
                    return;
                }
                Output::Finished(_) => self.finished += 1,
                Output::Append { records, .. } => {
                    self.stored += records.len() as u64;
                    self.pending = Some(Pending::Append);
                }
                Output::Step(_) => {
                    self.pending = Some(Pending::Step);
                    self.streaming = true;
                    self.step_calls = 0;
                }
                Output::Summarize(_) => self.pending = Some(Pending::Summary),
                Output::Hook { .. } => self.pending = Some(Pending::Hook),
                Output::Tools { jobs, .. } => self.pending = Some(Pending::Tools(jobs.len())),
                Output::OpenApproval(id) => self.approvals.push(id),
                Output::OpenClientCall(id) => self.calls.push(id),
                Output::Cell(_) => self.cell_open = true,
                Output::Event(_)
                | Output::Delta { .. }
                | Output::Preview { .. }
                | Output::Answer { .. }
                | Output::Interrupt(_) => {}
            }
        }
    }

    /// Marks the pending action answered when `input` answers it.
    fn answers(&mut self, input: &Input) {
        let kind = match input {
            Input::Appended(_) => Pending::Append,
            Input::StepEnded(_) => {
                self.streaming = false;
                Pending::Step
            }
            Input::SummaryEnded(_) => Pending::Summary,
            Input::HookEnded(_) => Pending::Hook,
            Input::CellEnded { .. } => {
                self.cell_open = false;
                return;
            }
            Input::ToolsEnded(_) => match self.pending {
                Some(Pending::Tools(n)) => Pending::Tools(n),
                _ => return,
            },
            _ => return,
        };
        if self.pending == Some(kind) {
            self.pending = None;
        }
    }

    fn stored(&self) -> Stored {
        Stored {
            room: Some(Room::unbounded()),
            records: Some(self.stored),
            revision: Some(format!("rev-{}", self.stored)),
        }
    }

    fn pick(list: &[String], b: u8) -> String {
        if b & 1 == 0 || list.is_empty() {
            format!("not-an-id-{b}")
        } else {
            list[usize::from(b >> 1) % list.len()].clone()
        }
    }

    /// One input read from the bytes.
    fn input(&mut self, d: &mut Bytes<'_>) -> Input {
        let failures = [
            StepFailure::Cancelled,
            StepFailure::Unreachable,
            StepFailure::Status(500),
            StepFailure::EmptyReply,
            StepFailure::ContextOverflow,
            StepFailure::Remote,
        ];
        match d.byte() % 24 {
            0..=2 => Input::Appended(Ok(self.stored())),
            3 => Input::Appended(Err(ErrorCode::PersistenceFailed)),
            4 => Input::Model(ModelEvent::TextDelta(d.text())),
            5 | 6 if self.step_calls >= FUZZ_STEP_CALLS => Input::Flush,
            5 | 6 => self.call(d),
            7 | 8 => Input::StepEnded(Ok(())),
            9 => Input::StepEnded(Err(failures[usize::from(d.byte()) % failures.len()])),
            10 => Input::SummaryEnded(match d.byte() % 3 {
                0 => Ok(d.text()),
                1 => Ok(String::new()),
                _ => Err(failures[usize::from(d.byte()) % failures.len()]),
            }),
            11 | 12 => self.tools_ended(d),
            13 => Input::HookEnded(match d.byte() % 4 {
                0 => HookEnd::Exit(0),
                1 => HookEnd::Exit(2),
                2 => HookEnd::Failed("timed out after 10 s".into()),
                _ => HookEnd::Cancelled,
            }),
            14 => {
                let b = d.byte();
                Input::Approval {
                    approval_id: Self::pick(&self.approvals, b),
                    allow: d.byte() & 1 == 1,
                }
            }
            15 => {
                let b = d.byte();
                Input::ClientResult {
                    call_id: Self::pick(&self.calls, b),
                    ok: d.byte() & 1 == 1,
                    output: d.text(),
                }
            }
            16 => self.tick(d),
            17 => Input::Cancel,
            18 => {
                if d.byte().is_multiple_of(8) {
                    Input::OutputLost
                } else {
                    Input::Flush
                }
            }
            19 => Input::Retry {
                attempt: u32::from(d.byte()),
                of: 4,
                wait_ms: u64::from(d.byte()) * 100,
            },
            20 => Input::DeltaRefused(MessageDeltaData {
                session_id: "s_fuzz".into(),
                run_id: "r".into(),
                message_id: format!("a-{}", d.byte()),
                part: u64::from(d.byte()),
                text: d.text(),
            }),
            21 if d.byte().is_multiple_of(4) => Input::CellStopped,
            22 => self.code_call(d),
            23 => cell_ended(d),
            _ => Input::Model(model_misc(d)),
        }
    }

    /// A nested call of the cell (or of none), to a tool reachable or not.
    fn code_call(&mut self, d: &mut Bytes<'_>) -> Input {
        let names = [
            "read_file",
            "write_file",
            "shell",
            CLIENT_TOOL,
            "exec",
            "nope",
        ];
        self.code_calls += 1;
        let name = names[usize::from(d.byte()) % names.len()];
        let input = match d.byte() % 3 {
            0 => json!({"path": "a"}),
            1 => json!({"command": "ls"}),
            _ => Value::String(d.text()),
        };
        let flags = d.byte();
        let refused = (flags & 4 != 0).then(|| (ToolErrorCode::InvalidInput, "not JSON".into()));
        Input::Call {
            call: self.code_calls,
            name: name.into(),
            input,
            more: flags & 3 == 0,
            refused,
            id: None,
        }
    }

    /// A tool call of the streaming step, to a tool offered or not, with any input.
    fn call(&mut self, d: &mut Bytes<'_>) -> Input {
        let names = [
            "read_file",
            "write_file",
            "shell",
            CLIENT_TOOL,
            "nope",
            "grep",
            "exec",
        ];
        self.step_calls += 1;
        let name = names[usize::from(d.byte()) % names.len()];
        let (name, input) = match d.byte() % 6 {
            _ if self.code && name == "nope" => ("exec", json!({"code": d.text()})),
            5 => (name, json!({"code": d.text()})),
            0 => (name, json!({"path": "a"})),
            1 => (name, json!({"path": "a", "content": d.text()})),
            2 => (name, Value::String(d.text())),
            3 => (name, json!({"command": "ls"})),
            _ => (name, json!({"pattern": d.text()})),
        };
        Input::Model(ModelEvent::ToolCall {
            call_id: format!("c{}", d.byte()),
            name: name.into(),
            input,
        })
    }

    /// Tool ends, as many as the pending batch or any other number.
    fn tools_ended(&self, d: &mut Bytes<'_>) -> Input {
        let n = match (d.byte() % 3, self.pending) {
            (0 | 1, Some(Pending::Tools(n))) => n,
            (_, _) => usize::from(d.byte() % 6),
        };
        let ends = (0..n)
            .map(|i| ToolEnd {
                outcome: (!d.byte().is_multiple_of(4)).then(|| ran(&format!("out {i}"))),
                lost: match d.byte() % 8 {
                    0 => Some(Lost::Exited),
                    1 => Some(Lost::Failed),
                    _ => None,
                },
            })
            .collect();
        Input::ToolsEnded(ends)
    }

    /// Time moves on, sometimes to the pending deadline's edge, sometimes far.
    fn tick(&mut self, d: &mut Bytes<'_>) -> Input {
        let b = d.byte();
        let until = self.idle.as_ref().and_then(|i| i.until);
        self.now = match (b % 4, until) {
            (0, Some(t)) => t.saturating_sub(1),
            (1, Some(t)) => t,
            (2, _) => self.now.saturating_add(u64::from(b) << 40),
            _ => self.now.saturating_add(u64::from(b) * 1_000),
        };
        Input::Tick
    }

    /// The honest answer to what the machine asked for last, once cancelled.
    fn honest(&mut self, p: Pending) -> Input {
        match p {
            Pending::Append => Input::Appended(Ok(self.stored())),
            Pending::Step => Input::StepEnded(Err(StepFailure::Cancelled)),
            Pending::Summary => Input::SummaryEnded(Err(StepFailure::Cancelled)),
            Pending::Hook => Input::HookEnded(HookEnd::Cancelled),
            Pending::Tools(n) => Input::ToolsEnded(
                (0..n)
                    .map(|_| ToolEnd {
                        outcome: Some(ToolOutcome::fail("cancelled")),
                        lost: None,
                    })
                    .collect(),
            ),
        }
    }
}

/// Feeds the inputs `data` spells to a run, then cancels it and answers honestly: it must
/// never panic, emit at most one `Finished` and nothing after it, and finish after the cancel.
pub fn drive(data: &[u8]) {
    let mut d = Bytes { data, at: 0 };
    let flags = d.byte();
    let mut f = Fuzz {
        run: Run::new(fuzz_config(flags)),
        now: 0,
        pending: None,
        finished: 0,
        approvals: Vec::new(),
        calls: Vec::new(),
        stored: 0,
        step_calls: 0,
        cell_open: false,
        code_calls: 0,
        code: flags & 32 == 32,
        idle: None,
        streaming: false,
    };
    // Inputs before the start are ignored.
    if flags & 16 == 16 {
        f.feed(Input::Cancel);
    }
    f.run.start(0);
    f.drain();
    while !d.done() {
        let input = f.input(&mut d);
        f.answers(&input);
        f.feed(input);
        // The query is total in every state.
        std::hint::black_box(f.run.state());
    }
    f.feed(Input::Cancel);
    f.end_honestly();
    assert_eq!(f.finished, 1, "no Finished after the cancel");
    f.feed(Input::Tick);
    f.run.start(f.now);
    f.drain();
}

/// The run's configuration from the flags byte: a small window (1), hooks (2), an earlier
/// conversation (4), quiet (8), `exec` offered (32).
fn fuzz_config(flags: u8) -> Config {
    let window = if flags & 1 == 1 { 10_000 } else { 200_000 };
    let hooks = if flags & 2 == 2 {
        let hook = |command: &str| Hook {
            command: command.into(),
            tools: Some(vec!["write_file".into(), "read_file".into()]),
        };
        Hooks {
            pre_tool: vec![hook("pre")],
            post_tool: vec![hook("post")],
        }
    } else {
        Hooks::default()
    };
    let mut cfg = config(window, hooks);
    if flags & 32 == 32 {
        let code = CodePolicies {
            shell: Policy::Allow,
            ..CodePolicies::default()
        };
        cfg = with_code(cfg, code, 3, 5_000);
    }
    if flags & 4 == 4 {
        cfg.history.after = vec![
            Item::User { text: "q".into() },
            Item::Assistant { text: "a".into() },
        ];
        cfg.history.last_input_tokens = Some(u64::from(flags) * 40);
    }
    cfg.quiet = flags & 8 == 8;
    cfg
}

impl Fuzz {
    /// After the cancel, answers what the run asked for honestly until it finishes.
    fn end_honestly(&mut self) {
        for _ in 0..1_000 {
            if self.finished > 0 {
                return;
            }
            if let Some(p) = self.pending.take() {
                let input = self.honest(p);
                self.feed(input);
            } else if self.cell_open {
                // The interrupted helper reports the end.
                self.feed(Input::CellEnded {
                    state: CellState::Cancelled,
                    output: String::new(),
                    elapsed_ms: 0,
                });
                self.cell_open = false;
            } else if self.streaming {
                // The step a call back interrupted still owes its end.
                self.feed(Input::StepEnded(Err(StepFailure::Cancelled)));
                self.streaming = false;
            } else if let Some(w) = self.idle.as_ref().and_then(|i| i.waiting.clone()) {
                // A cancelled run ends its waits at once: a wait that outlives it is a bug.
                panic!("still waiting for {w:?} after the cancel");
            } else {
                panic!(
                    "stuck in {:?}: nothing asked, nothing awaited",
                    self.run.state()
                );
            }
        }
    }
}

/// A usage, a reasoning summary, a provider item or a stop.
/// The open cell's end, in any state.
fn cell_ended(d: &mut Bytes<'_>) -> Input {
    Input::CellEnded {
        state: [
            CellState::Completed,
            CellState::Failed,
            CellState::TimedOut,
            CellState::OutOfMemory,
            CellState::Cancelled,
        ][usize::from(d.byte() % 5)],
        output: d.text(),
        elapsed_ms: u64::from(d.byte()) * 100,
    }
}

fn model_misc(d: &mut Bytes<'_>) -> ModelEvent {
    match d.byte() % 5 {
        0 => ModelEvent::Usage(Usage {
            input_tokens: u64::from(d.byte()) * 100,
            output_tokens: 1,
            cached_input_tokens: None,
            cache_creation_input_tokens: None,
        }),
        1 => ModelEvent::ReasoningSummary {
            id: "r0".into(),
            text: d.text(),
        },
        2 => ModelEvent::ProviderItem(json!({"type": "thinking", "signature": "x"})),
        3 => ModelEvent::Compacted,
        _ => ModelEvent::Stop(StopReason::EndTurn),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn odd_inputs_do_not_panic() {
        for b in [
            &b""[..],
            b"\x00",
            b"\x01\x11\x11",
            b"\x1f\x00\x07\x05\x01\x00\x00\x07\x0e\x01\x01",
            b"\x02\x00\x05\x01\x00\x00\x07\x0d\x00\x0d\x00\x0b\x00\x00\x00",
            b"\x00\x00\x05\x03\x00\x00\x07\x0f\x01\x00\x00\x10\x02",
            &[0xff; 64],
        ] {
            super::drive(b);
        }
    }

    /// Runs with `exec` offered (flag 32), on inputs from a fixed generator: cells started,
    /// nested calls, ends and interrupts in any order keep the fuzz invariants.
    #[test]
    fn random_inputs_with_code_mode_do_not_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..6_000 {
            let data: Vec<u8> = (0..240)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if i == 0 {
                        (x as u8 & !16) | 32
                    } else {
                        (x >> 24) as u8
                    }
                })
                .collect();
            super::drive(&data);
        }
    }

    /// Replays `fuzz/corpus/run` (and `fuzz/regressions/run` where it exists).
    #[test]
    fn fuzz_corpus_replays() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
        let mut n = 0;
        for kind in ["corpus", "regressions"] {
            let Ok(dir) = std::fs::read_dir(root.join(kind).join("run")) else {
                continue;
            };
            let mut paths: Vec<_> = dir.map(|e| e.unwrap().path()).collect();
            paths.sort();
            for p in paths.iter().filter(|p| p.is_file()) {
                let data = std::fs::read(p).unwrap();
                let ok = std::panic::catch_unwind(|| super::drive(&data)).is_ok();
                assert!(ok, "{} panicked", p.display());
                n += 1;
            }
        }
        assert!(n > 0, "fuzz/corpus/run is empty");
    }
}

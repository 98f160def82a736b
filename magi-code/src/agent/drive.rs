//! The thin driver of one run (`run::Run`): it carries out the machine's outputs — events to
//! the client, appends to the store, model requests over the provider, tools and hooks on
//! this thread or scoped ones, waits for the client's answers — and feeds their outcomes back
//! with the time. It decides nothing the machine decides.

use super::approvals::Decision;
use super::client;
use super::emit::RunOutput;
use super::params::LoopParams;
use super::subagent;
use crate::history::compact::Snapshot;
use crate::history::room::Room;
use crate::history::Record;
use crate::providers::{ModelClient, ModelEvent, ModelRequest, StepFailure, StepSink};
use crate::run::compaction::{SUMMARY_BYTES, SUMMARY_SYSTEM};
use crate::run::{
    AppendKind, Finished, Idle, Input, Output, Persistence, Reply, Run, RunOutcome, StepRequest,
    Stored, ToolEnd, ToolJob, Waiting,
};
use crate::session;
use crate::tools::{self, ToolKind, ToolOutcome};
use crate::util::cancel::{Alarm, Cancel};
use crate::util::clock::RealClock;
use crate::util::ids::fresh_revision;
use crate::wire::events::MessageDeltaData;
use crate::wire::Event;
use protocol_core::ErrorCode;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a full chunk of coalesced delta text waits for channel room before it is dropped.
const FULL_CHUNK_WAIT: Duration = Duration::from_millis(100);

/// The driver's side of one run.
struct Driver<'o, 'a, 'c> {
    out: &'o mut RunOutput<'a>,
    p: &'o LoopParams<'o>,
    t0: Instant,
    /// Whether the run has been told of the cancellation it sees.
    told_cancel: bool,
    /// The open cell's stop, answers and interrupt, while its nested calls run.
    cell: Option<super::cell::CellWork>,
    /// The model client; out of here while a step streams.
    client: Option<&'c mut dyn ModelClient>,
    /// The run's terminal facts, once out.
    finished: Option<Finished>,
    /// The machine's answers to calls back into the run (a cell's code's, a provider's
    /// mid-step) not yet taken, and the number of the next call a provider makes.
    answers: HashMap<u64, Reply>,
    next_call: u64,
}

/// Where the one drain left the run.
enum Settled {
    /// Nothing is queued and it waits for nothing the drain can wait for.
    Idle(Idle),
    /// It finished.
    Done,
}

/// Runs an admitted turn (or a subagent's task) to its terminal facts.
pub fn execute(
    out: &mut RunOutput<'_>,
    client: &mut dyn ModelClient,
    prompt: &str,
    history: Snapshot,
    p: &LoopParams<'_>,
) -> Finished {
    let mut run = Run::new(super::params::config(out, prompt, history, p));
    let mut d = Driver {
        out,
        p,
        t0: Instant::now(),
        told_cancel: false,
        cell: None,
        client: Some(client),
        finished: None,
        answers: HashMap::new(),
        next_call: 0,
    };
    run.start(d.now());
    d.settle(&mut run);
    // Idle with nothing to wait for, unfinished: a bug of the machine, reported safely.
    d.finished.take().unwrap_or(Finished {
        outcome: RunOutcome::Failed,
        persistence: Persistence::Degraded,
        revision: None,
        error_code: Some(ErrorCode::ExecutionFailed),
    })
}

impl Driver<'_, '_, '_> {
    fn now(&self) -> u64 {
        u64::try_from(self.t0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Feeds `input`, telling the run of a cancellation, or of the helper's end of the open
    /// cell, first.
    fn feed(&mut self, run: &mut Run, input: Input) {
        let now = self.now();
        if !self.told_cancel && self.out.ctx.cancel.is_cancelled() {
            self.told_cancel = true;
            run.handle(Input::Cancel, now);
        }
        if let Some(w) = self.cell.as_mut().filter(|w| !w.told) {
            if w.helper_done.is_cancelled() {
                w.told = true;
                run.handle(Input::CellStopped, now);
            }
        }
        run.handle(input, now);
    }

    /// The token the work about to run obeys when a cell is open (else the turn's): the
    /// cell's stop, its alarm armed at `until`, the cell's clock.
    fn arm(&mut self, until: Option<u64>) -> Option<Arc<Cancel>> {
        let t0 = self.t0;
        let w = self.cell.as_mut()?;
        if w.alarm.is_none() && until.is_some() {
            // Without its thread the clock still ends the cell, only not under a call.
            w.alarm = Alarm::start(Arc::clone(&w.stop)).ok();
        }
        if let Some(a) = &w.alarm {
            a.arm(until.map(|ms| t0 + Duration::from_millis(ms)));
        }
        Some(Arc::clone(&w.stop))
    }

    /// The one drain: carries out every output of `run` in order until it is idle or
    /// finished, and routes each (a nested call's answer and an interrupt to the open cell).
    fn drain(&mut self, run: &mut Run) -> Settled {
        loop {
            let Some(o) = run.poll_output() else {
                return Settled::Done;
            };
            match o {
                Output::Idle(idle) => return Settled::Idle(idle),
                Output::Finished(f) => self.finished = Some(f),
                Output::Answer { call, result } => {
                    self.answers.insert(call, result);
                }
                Output::Interrupt(r) => {
                    if let Some(w) = self.cell.as_mut() {
                        w.interrupt = Some(r);
                    }
                }
                o => self.perform(run, o),
            }
        }
    }

    /// Drains `run` and blocks on the client's answers it waits for, until it is idle
    /// waiting for nothing the driver can wait for, or finished.
    fn settle(&mut self, run: &mut Run) -> Settled {
        loop {
            match self.drain(run) {
                Settled::Idle(idle) if idle.waiting.is_some() => self.wait(run, &idle),
                settled => return settled,
            }
        }
    }

    /// The work is over: the alarm waits for the next.
    fn disarm(&self) {
        if let Some(a) = self.cell.as_ref().and_then(|w| w.alarm.as_ref()) {
            a.arm(None);
        }
    }

    /// Carries out one output that is not the drain's own.
    fn perform(&mut self, run: &mut Run, o: Output) {
        match o {
            Output::Event(e) => self.event(run, e),
            Output::Delta { data, full } => self.delta(run, data, full),
            Output::Append { records, kind } => {
                let r = self.append(records, kind);
                self.feed(run, Input::Appended(r));
            }
            Output::Step(req) => self.stream(run, &req, false),
            Output::Summarize(req) => self.stream(run, &req, true),
            Output::OpenApproval(id) => self.out.ctx.approvals.open(&self.out.run_id, &id),
            Output::Preview { name, input, event } => {
                let cwd = &self.out.ctx.rt.cwd;
                if let Some(e) = tools::builtin::diff_event(&name, &input, cwd, event) {
                    self.event(run, Event::ToolDiff(e));
                }
            }
            Output::OpenClientCall(id) => self.out.ctx.client_calls.open(&self.out.run_id, &id),
            Output::Hook {
                command,
                stdin,
                until,
            } => {
                let ctx = self.out.ctx;
                let bound = super::hooks::HOOK_RUN;
                let stop = self.arm(until);
                let cancel = stop.as_deref().unwrap_or(ctx.cancel);
                let end =
                    super::hooks::run(&command, &ctx.rt.cwd, stdin, bound, cancel, &RealClock);
                self.disarm();
                self.feed(run, Input::HookEnded(end));
            }
            Output::Tools { jobs, until } => {
                let stop = self.arm(until);
                let ends = self.tools(&jobs, stop.as_deref());
                self.disarm();
                if self.out.output_lost {
                    // A subagent's approval request could not be delivered.
                    self.feed(run, Input::OutputLost);
                }
                self.feed(run, Input::ToolsEnded(ends));
            }
            Output::Cell(job) => {
                let (ctx, sid) = (self.out.ctx, self.out.session_id.clone());
                super::cell::run(&mut Nested { d: self }, run, job, ctx, &sid);
            }
            // The drain's own (`drain` takes them before they get here).
            Output::Answer { .. }
            | Output::Interrupt(_)
            | Output::Idle(_)
            | Output::Finished(_) => {}
        }
    }

    /// Sends an event that must arrive; if it cannot within the critical wait, the run is
    /// cancelled and will end `output_unavailable`.
    fn event(&mut self, run: &mut Run, event: Event) {
        let lost = self.out.output_lost;
        self.out.critical(event);
        if !lost && self.out.output_lost {
            self.feed(run, Input::OutputLost);
        }
    }

    /// Sends a delta if there is room: a full chunk waits a moment and is dropped after (the
    /// part number skips, reconcile repairs it); a refused flush rides with the next delta.
    fn delta(&mut self, run: &mut Run, data: MessageDeltaData, full: bool) {
        if self.out.output_lost {
            return;
        }
        let part = usize::try_from(data.part).unwrap_or(usize::MAX);
        if full {
            // Dropped if there is still no room: the reconcile repairs it.
            self.out
                .delta_wait(&data.message_id, part, &data.text, FULL_CHUNK_WAIT);
        } else if !self.out.delta(&data.message_id, part, &data.text) {
            self.feed(run, Input::DeltaRefused(data));
        }
    }

    /// Appends stamped records and says what the machine needs of the store after.
    fn append(&mut self, mut records: Vec<Record>, kind: AppendKind) -> Result<Stored, ErrorCode> {
        let ts = crate::util::time::rfc3339(crate::util::time::now_ms());
        for r in &mut records {
            r.ts.clone_from(&ts);
        }
        self.out.append(&records)?;
        let ctx = self.out.ctx;
        // A subagent's history is its own file: never projected, its revision its own.
        if self.out.subagent.is_some() {
            return Ok(Stored {
                room: Some(Room::unbounded()),
                records: None,
                revision: (kind == AppendKind::Input).then(fresh_revision),
            });
        }
        let mut st = ctx.state();
        let Some(a) = st.attachment.as_mut() else {
            // Released meanwhile: the input's revision is a fresh one, as for a subagent.
            return Ok(Stored {
                revision: (kind == AppendKind::Input).then(fresh_revision),
                ..Stored::default()
            });
        };
        let revision = match kind {
            // The revision names the history as of the input (the refreshed snapshot).
            AppendKind::Input => Some(session::acknowledge(&ctx.rt, a)),
            AppendKind::Final => session::refresh(&ctx.rt, a, &Cancel::default()).ok(),
            AppendKind::Compaction | AppendKind::Step => None,
        };
        let stored = (kind == AppendKind::Input)
            .then(|| a.history.as_ref().filter(|h| h.error().is_none()))
            .flatten()
            .map(crate::history::History::records);
        Ok(Stored {
            room: Some(session::room(a)),
            records: stored,
            revision,
        })
    }

    fn request<'r>(&self, req: &'r StepRequest, summary: bool) -> ModelRequest<'r>
    where
        Self: 'r,
    {
        let p = self.p;
        ModelRequest {
            model: p.model,
            provider: p.provider,
            instructions: if summary {
                SUMMARY_SYSTEM
            } else {
                p.instructions
            },
            items: &req.items,
            tools: if summary { &[] } else { p.tools },
            effort: if summary { None } else { p.effort },
            thinking: p.thinking,
            max_output_tokens: req.max_output_tokens,
        }
    }

    /// Streams one step (or, `summary`, the summary request, whose text is collected and
    /// nothing streamed), feeding its events as they come, then its end.
    fn stream(&mut self, run: &mut Run, req: &StepRequest, summary: bool) {
        let Some(client) = self.client.take() else {
            // The machine asks for no request while one streams.
            let input = if summary {
                Input::SummaryEnded(Err(StepFailure::Remote))
            } else {
                Input::StepEnded(Err(StepFailure::Remote))
            };
            return self.feed(run, input);
        };
        let cancel = self.out.ctx.cancel;
        let request = self.request(req, summary);
        let mut sink = Live {
            d: self,
            run,
            summary: summary.then(String::new),
        };
        let result = client.step(&request, cancel, &mut sink);
        let text = sink.summary.take();
        self.client = Some(client);
        let input = match text {
            Some(text) => Input::SummaryEnded(result.map(|()| text)),
            None => Input::StepEnded(result),
        };
        self.feed(run, input);
    }

    /// Blocks on the client's answer `idle` waits for, until its deadline.
    fn wait(&mut self, run: &mut Run, idle: &Idle) {
        let Some(waiting) = idle.waiting.clone() else {
            return;
        };
        let deadline = idle.until.unwrap_or(0);
        let left = Duration::from_millis(deadline.saturating_sub(self.now()));
        let ctx = self.out.ctx;
        let stop = self.cell.as_ref().map(|w| Arc::clone(&w.stop));
        let cancelled =
            || ctx.cancel.is_cancelled() || stop.as_ref().is_some_and(|s| s.is_cancelled());
        // The registry's wait expired: the run's deadline has come.
        let expired = |d: &mut Self, run: &mut Run| {
            let now = d.now().max(deadline);
            run.handle(Input::Tick, now);
        };
        match waiting {
            Waiting::Approval(id) => match ctx.approvals.wait(&id, left, &cancelled) {
                d @ (Decision::Allowed | Decision::Denied) => {
                    let allow = d == Decision::Allowed;
                    self.feed(
                        run,
                        Input::Approval {
                            approval_id: id,
                            allow,
                        },
                    );
                }
                Decision::Expired => expired(self, run),
                Decision::Cancelled => self.feed(run, Input::Tick),
            },
            Waiting::ClientCall(id) => match ctx.client_calls.wait(&id, left, &cancelled) {
                super::client_calls::CallEnd::Answered { ok, output } => {
                    let input = Input::ClientResult {
                        call_id: id,
                        ok,
                        output,
                    };
                    self.feed(run, input);
                }
                super::client_calls::CallEnd::TimedOut => expired(self, run),
                super::client_calls::CallEnd::Cancelled => self.feed(run, Input::Tick),
            },
        }
    }

    /// Runs the batch's tools (cut short by `stop`, a cell's, or else the turn's
    /// cancellation): one on this thread, several (read-class built-ins) on scoped threads; a
    /// panicked thread's tool has no outcome.
    fn tools(&mut self, jobs: &[ToolJob], stop: Option<&Cancel>) -> Vec<ToolEnd> {
        if let [job] = jobs {
            return vec![self.tool(job, stop)];
        }
        let cwd = &self.out.ctx.rt.cwd;
        let cancel = stop.unwrap_or(self.out.ctx.cancel);
        std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|j| match j.kind {
                    ToolKind::Builtin(b) => {
                        Some(scope.spawn(move || tools::run(b, &j.input, cwd, cancel)))
                    }
                    _ => None,
                })
                .collect();
            handles
                .into_iter()
                .map(|h| ToolEnd {
                    outcome: h.and_then(|h| h.join().ok()),
                    lost: None,
                })
                .collect()
        })
    }

    fn tool(&mut self, job: &ToolJob, stop: Option<&Cancel>) -> ToolEnd {
        let ctx = self.out.ctx;
        let cancel = stop.unwrap_or(ctx.cancel);
        let done = |outcome| ToolEnd {
            outcome: Some(outcome),
            lost: None,
        };
        match job.kind {
            ToolKind::Builtin(b) => done(tools::run(b, &job.input, &ctx.rt.cwd, cancel)),
            ToolKind::Task => done(match stop {
                Some(stop) => self.scoped_subagent(&job.input, stop),
                None => subagent_run(self.out, &job.input),
            }),
            ToolKind::Mcp => match ctx.mcp.as_deref() {
                Some(hub) => super::mcp_call::call_mcp(hub, &job.name, &job.input, cancel),
                None => done(ToolOutcome::fail("unknown tool")),
            },
            ToolKind::Client | ToolKind::Code => done(ToolOutcome::fail("unknown tool")),
        }
    }
}

impl Driver<'_, '_, '_> {
    /// Runs one `task` call of an open cell: its subagent obeys the cell's `stop`, so the
    /// cell's clock or end cancels it as `turn.cancel` would.
    fn scoped_subagent(&mut self, input: &serde_json::Value, stop: &Cancel) -> ToolOutcome {
        let scoped = self.out.ctx.with_cancel(stop);
        let mut out = RunOutput::new(
            &scoped,
            self.out.session_id.clone(),
            self.out.run_id.clone(),
        );
        out.selection.clone_from(&self.out.selection);
        out.tools = self.out.tools.clone();
        let outcome = subagent_run(&mut out, input);
        if out.output_lost {
            self.out.output_lost = true;
        }
        outcome
    }
}

/// Runs one `task` call: its subagent is a run of its own, driven here to its end.
fn subagent_run(parent: &mut RunOutput<'_>, input: &serde_json::Value) -> ToolOutcome {
    let mut child = match subagent::prepare(parent, input) {
        Ok(c) => c,
        Err(refused) => return refused,
    };
    let rt = &parent.ctx.rt;
    let effort = child.selection.effective_effort();
    let table = child.out.tools.clone();
    let params = client::loop_params(
        rt,
        &child.selection,
        effort.as_deref(),
        &child.instructions,
        table.specs(),
    );
    // A new history: its `session_meta` is the one record before the subagent's input.
    let fresh = Snapshot {
        records: 1,
        ..Snapshot::default()
    };
    let finished = execute(
        &mut child.out,
        child.model.as_mut(),
        &child.prompt,
        fresh,
        &params,
    );
    if child.out.output_lost {
        parent.output_lost = true;
    }
    subagent::outcome(&child.out, &finished)
}

/// The driver as an open cell re-enters it: the same drain, waits and inputs.
struct Nested<'x, 'o, 'a, 'c> {
    d: &'x mut Driver<'o, 'a, 'c>,
}

impl super::cell::Perform for Nested<'_, '_, '_, '_> {
    fn settle(&mut self, run: &mut Run) {
        self.d.settle(run);
    }

    fn feed(&mut self, run: &mut Run, input: Input) {
        self.d.feed(run, input);
    }

    fn answer(&mut self, call: u64) -> Option<Reply> {
        self.d.answers.remove(&call)
    }

    fn cell(&mut self) -> &mut Option<super::cell::CellWork> {
        &mut self.d.cell
    }
}

/// A step's stream into the run: each event fed and the run settled at once (deltas and
/// events go out as they come); a summary's text is only collected (it is not a message).
struct Live<'r, 'o, 'a, 'c> {
    d: &'r mut Driver<'o, 'a, 'c>,
    run: &'r mut Run,
    /// The summary's text so far, for a summary request.
    summary: Option<String>,
}

impl Live<'_, '_, '_, '_> {
    /// Feeds `input` and settles the run; whether the stream goes on.
    fn give(&mut self, input: Input) -> bool {
        self.d.feed(self.run, input);
        match self.d.settle(self.run) {
            Settled::Idle(idle) => !idle.stop_streaming,
            Settled::Done => false,
        }
    }
}

impl StepSink for Live<'_, '_, '_, '_> {
    fn event(&mut self, ev: ModelEvent) -> bool {
        let Some(text) = self.summary.as_mut() else {
            return self.give(Input::Model(ev));
        };
        if let ModelEvent::TextDelta(t) = ev {
            text.push_str(&t);
        }
        text.len() <= SUMMARY_BYTES * 2
    }

    fn flush(&mut self) {
        if self.summary.is_none() {
            self.give(Input::Flush);
        }
    }

    fn retry(&mut self, attempt: u32, of: u32, wait: Duration) {
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        self.give(Input::Retry {
            attempt,
            of,
            wait_ms,
        });
    }

    fn call_tool(
        &mut self,
        id: Option<&str>,
        name: &str,
        input: serde_json::Value,
    ) -> Result<String, String> {
        let call = self.d.next_call;
        self.d.next_call += 1;
        self.give(Input::Call {
            call,
            name: name.to_owned(),
            input,
            more: false,
            refused: None,
            id: id.map(str::to_owned),
        });
        match self.d.answers.remove(&call) {
            Some(Ok(output)) => Ok(output),
            Some(Err((_, why))) => Err(why),
            None => Err("cancelled".to_owned()),
        }
    }
}

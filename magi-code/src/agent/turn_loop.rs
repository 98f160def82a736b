//! The body of one admitted run (`runner.md` 2): the durable input, then steps — one model
//! request each, its text streamed, its tool calls run and answered — until a step calls no
//! tool, then the durable terminal records.

use super::compaction::{self, Compacted, Compactor};
use super::content::{Content, CALLS_STOPPED, REPLY_STOPPED};
use super::emit::RunOutput;
use super::outcome::{Finished, Persistence, RunOutcome};
use super::repeats::{Repeats, REPEATED};
use super::segment::{close_segment, Segment};
use super::tool_call::{self, ToolRun};
use crate::history::compact::Snapshot;
use crate::history::{Body, Item, Record, ToolSpec};
use crate::providers::model::{StopReason, Thinking, Usage};
use crate::providers::{ModelClient, ModelEvent, ModelRequest, StepFailure, StepSink};
use crate::session;
use crate::util::cancel::Cancel;
use crate::util::ids::fresh_revision;
use crate::util::redact::sanitize_text;
use crate::wire::DiagnosticCode;
use protocol_core::limits::RUN_ACTIVITIES;
use protocol_core::ErrorCode;
use serde_json::Value;
use std::time::Duration;

/// What a turn sends besides the conversation.
#[derive(Debug, Clone, Copy)]
pub struct LoopParams<'a> {
    /// The provider (settings name).
    pub provider: &'a str,
    /// The model.
    pub model: &'a str,
    /// Base prompt and instructions.
    pub instructions: &'a str,
    /// The tools offered.
    pub tools: &'a [ToolSpec],
    /// The effective explicit effort, `None` for `default`.
    pub effort: Option<&'a str>,
    /// How an Anthropic model takes effort.
    pub thinking: Thinking,
    /// The provider's output bound; a step's is at most the window less its estimate
    /// (`decisions.md` 45), the summary request's at most a quarter of the window.
    pub max_output_tokens: u64,
    /// Steps per turn.
    pub max_steps: u32,
    /// The model's context window in tokens; `u64::MAX` never compacts (the scripted
    /// provider, which reads no conversation).
    pub context_window: u64,
}

/// One step's collected output.
#[derive(Default)]
struct StepOut {
    /// Assistant-side items in the model's order; the text segment's place is `text_at`.
    items: Vec<Item>,
    text_at: Option<usize>,
    calls: Vec<(String, String, Value)>,
    usage: Option<Usage>,
    stop: Option<StopReason>,
    /// The run's content bound was reached (`content_limit`).
    over: bool,
}

/// Feeds model events into the segment, the records and the step's output.
struct Sink<'o, 'a> {
    out: &'o mut RunOutput<'a>,
    seg: &'o mut Segment,
    records: &'o mut Vec<Record>,
    step: &'o mut StepOut,
    content: &'o mut Content,
    provider: &'o str,
}

impl StepSink for Sink<'_, '_> {
    fn event(&mut self, ev: ModelEvent) -> bool {
        let run_id = self.out.run_id.clone();
        match ev {
            ModelEvent::TextDelta(t) => {
                // Control characters alone show nothing (redaction drops them).
                if t.chars().all(|c| c.is_control() && c != '\n' && c != '\t') {
                    return true;
                }
                // The run keeps what fits its bounds; the rest ends it (`content_limit`).
                let n = self.content.take_text(self.seg, &t);
                if n > 0 {
                    if self.seg.is_empty() {
                        self.step.text_at = Some(self.step.items.len());
                        self.step.items.push(Item::Assistant {
                            text: String::new(),
                        });
                    }
                    self.seg.push(self.out, &t[..n]);
                }
                if n < t.len() {
                    self.step.over = true;
                    return false;
                }
            }
            ModelEvent::ToolCall {
                call_id,
                name,
                input,
            } => {
                self.step.items.push(Item::ToolCall {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                });
                self.step.calls.push((call_id, name, input));
            }
            ModelEvent::ReasoningSummary { id, text } => {
                let text = sanitize_text(&text);
                if !self.content.take_summary(&text) {
                    self.step.over = true;
                    return false;
                }
                self.records.push(self.out.record(Body::ReasoningSummary {
                    run_id,
                    text,
                    item_id: Some(id),
                    provider_summary: Some(true),
                }));
            }
            ModelEvent::ProviderItem(item) => {
                let provider = self.provider.to_owned();
                self.records.push(self.out.record(Body::ProviderItem {
                    run_id,
                    provider: provider.clone(),
                    item: item.clone(),
                }));
                self.step.items.push(Item::ProviderItem { provider, item });
            }
            ModelEvent::Usage(u) => self.step.usage = Some(u),
            ModelEvent::Stop(r) => self.step.stop = Some(r),
        }
        true
    }

    fn flush(&mut self) {
        self.seg.flush(self.out);
    }

    fn retry(&mut self, attempt: u32, wait: Duration) {
        let summary = format!(
            "retrying the provider request in {} ms (retry {attempt} of {})",
            wait.as_millis(),
            crate::providers::http::MAX_RETRIES
        );
        self.out.diagnostic(DiagnosticCode::ProviderRetry, &summary);
    }
}

/// How the loop ended before the terminal records.
enum End {
    Completed,
    Cancelled,
    Failed(ErrorCode),
}

/// Runs an admitted turn to its terminal facts.
pub fn execute(
    out: &mut RunOutput<'_>,
    client: &mut dyn ModelClient,
    prompt: &str,
    history: Snapshot,
    p: &LoopParams<'_>,
) -> Finished {
    let cancel = out.ctx.cancel;
    // Required input first: durable before any provider work.
    let input_id = format!("u-{}", uuid::Uuid::new_v4().simple());
    let user = out.record(Body::UserInput {
        run_id: out.run_id.clone(),
        message_id: Some(input_id.clone()),
        text: prompt.to_owned(),
    });
    if let Err(code) = out.append(std::slice::from_ref(&user)) {
        return Finished {
            outcome: RunOutcome::Failed,
            persistence: Persistence::NotStarted,
            revision: None,
            error_code: Some(code),
        };
    }
    // The revision names the history as of the input (the attachment's refreshed snapshot);
    // a subagent's history is its own file, so the session's snapshot does not move for it.
    let revision = if out.subagent.is_some() {
        fresh_revision()
    } else {
        let mut st = out.ctx.state();
        st.attachment
            .as_mut()
            .map_or_else(fresh_revision, |a| session::acknowledge(&out.ctx.rt, a))
    };
    out.input_persisted(input_id, revision);
    // Tools an MCP server listed but that are not offered (decisions.md 37): once per child,
    // in its first run, as there is no `magi-code mcp list` to show them yet.
    if out.subagent.is_none() {
        if let Some(summary) = out.ctx.mcp.as_ref().and_then(|h| h.left_out_report()) {
            out.diagnostic(DiagnosticCode::McpToolsLeftOut, &summary);
        }
    }

    let fixed = compaction::fixed_bytes(p.instructions, p.tools);
    let cwd = out.ctx.rt.cwd.clone();
    let (mut comp, mut items) = Compactor::start(history, p.context_window, fixed, cwd, prompt);
    compaction::begin_turn(out, &mut comp, &user, items.len() - 1);
    let mut records: Vec<Record> = Vec::new();
    let mut content = Content::start(out);
    let mut degraded = false;
    let mut end = End::Failed(ErrorCode::ExecutionFailed);
    let mut steps = 0u32;
    let mut repeats = Repeats::default();
    let mut retried = false;
    loop {
        if steps >= p.max_steps {
            out.diagnostic(
                DiagnosticCode::StepLimit,
                &format!("the turn reached its bound of {} steps", p.max_steps),
            );
            break;
        }
        steps += 1;
        // A conversation that is only this turn's input has nothing to summarize.
        let mut compacted = Compacted::Skipped;
        if comp.due(&items) && items.len() > 1 {
            compacted = compaction::compact(out, client, &mut comp, &mut items, p);
        }
        let mut bound =
            compaction::output_bound(p.context_window, comp.estimate(&items), p.max_output_tokens);
        // No room for a reply: compact first if this step has not, then give up.
        if bound.is_none() && compacted == Compacted::Skipped && items.len() > 1 {
            compacted = compaction::compact(out, client, &mut comp, &mut items, p);
            bound = compaction::output_bound(
                p.context_window,
                comp.estimate(&items),
                p.max_output_tokens,
            );
        }
        match compacted {
            Compacted::Cancelled => {
                end = End::Cancelled;
                break;
            }
            Compacted::Unstored => {
                degraded = true;
                end = End::Failed(ErrorCode::PersistenceFailed);
                break;
            }
            Compacted::Done | Compacted::Skipped | Compacted::Failed => {}
        }
        // Every earlier record of the run is appended by now: measure what is left exactly.
        content.refresh(out);
        let Some(max_output_tokens) = bound else {
            out.diagnostic(
                DiagnosticCode::ContextWindowTooSmall,
                &too_small(p, comp.estimate(&items)),
            );
            break;
        };
        let estimate = comp.estimate(&items);
        let mut seg = Segment::new();
        let mut step = StepOut::default();
        let req = ModelRequest {
            model: p.model,
            provider: p.provider,
            instructions: p.instructions,
            items: &items,
            tools: p.tools,
            effort: p.effort,
            thinking: p.thinking,
            max_output_tokens,
        };
        let result = {
            let mut sink = Sink {
                out,
                seg: &mut seg,
                records: &mut records,
                step: &mut step,
                content: &mut content,
                provider: p.provider,
            };
            client.step(&req, cancel, &mut sink)
        };
        let result = result.map_err(|f| compaction::overflowed(f, estimate, p.context_window));
        if let Some(u) = step.usage {
            records.push(out.record(Body::Usage {
                run_id: out.run_id.clone(),
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cached_input_tokens: u.cached_input_tokens,
            }));
        }
        // A step the provider refused as too long: compact and send it once more.
        if matches!(result, Err(StepFailure::ContextOverflow))
            && !retried
            && records.is_empty()
            && step.items.is_empty()
            && seg.is_empty()
            && !cancel.is_cancelled()
        {
            retried = true;
            match compaction::compact(out, client, &mut comp, &mut items, p) {
                Compacted::Done => {
                    steps -= 1;
                    continue;
                }
                Compacted::Unstored => {
                    degraded = true;
                    end = End::Failed(ErrorCode::PersistenceFailed);
                    break;
                }
                Compacted::Skipped | Compacted::Failed | Compacted::Cancelled => {}
            }
        }
        let stopped = match result {
            _ if out.output_lost => Some(End::Failed(ErrorCode::OutputUnavailable)),
            _ if step.over => {
                out.diagnostic(DiagnosticCode::ContentLimit, REPLY_STOPPED);
                Some(End::Failed(ErrorCode::ContentLimit))
            }
            Err(StepFailure::Cancelled) => Some(End::Cancelled),
            _ if cancel.is_cancelled() => Some(End::Cancelled),
            Err(f) => {
                if let Some(code) = f.code() {
                    out.diagnostic(code, &failure_summary(f, p));
                }
                Some(End::Failed(ErrorCode::ExecutionFailed))
            }
            Ok(()) if step.calls.is_empty() => Some(End::Completed),
            Ok(()) => None,
        };
        // The step's text is complete: the redactor's held-back tail is judged now.
        seg.end(out);
        if let (Some(i), false) = (step.text_at, seg.text.is_empty()) {
            step.items[i] = Item::Assistant {
                text: seg.text.clone(),
            };
        }
        // Calls whose entries would not fit what the history can show do not run.
        let stopped = stopped.or_else(|| {
            (!content.calls_fit(&step.calls, out.ctx.rt.tool_cards)).then(|| {
                out.diagnostic(DiagnosticCode::ContentLimit, CALLS_STOPPED);
                End::Failed(ErrorCode::ContentLimit)
            })
        });
        if let Some(e) = stopped {
            let partial = !matches!(e, End::Completed);
            close_segment(out, &mut seg, partial, &mut records);
            end = e;
            break;
        }
        // Tool calls separate assistant segments: reconcile the text so far first.
        close_segment(out, &mut seg, false, &mut records);
        let results = run_calls(out, &step.calls, &mut repeats, &mut records);
        content.charge(&records);
        items.append(&mut step.items);
        items.extend(results);
        if out.activities_full {
            // The bound is reached: the calls past it were answered with an error; the run
            // ends here rather than letting the model go on without tools.
            out.diagnostic(
                DiagnosticCode::ContentLimit,
                &format!("the turn reached its bound of {RUN_ACTIVITIES} tool activities"),
            );
            end = End::Failed(ErrorCode::ContentLimit);
            break;
        }
        retried = false;
        comp.note(&records);
        // Each tool step is durable before the next request: a crash leaves whole steps.
        if out.append(&records).is_err() {
            degraded = true;
            end = End::Failed(ErrorCode::PersistenceFailed);
            records.clear();
            break;
        }
        records.clear();
    }
    finish(out, end, records, degraded)
}

/// The `context_window_too_small` summary: the window, the estimate, and the settings that
/// set the window.
fn too_small(p: &LoopParams<'_>, estimate: u64) -> String {
    format!(
        "the context window of {} tokens leaves no room for a reply to this request (about {estimate} tokens); raise providers.{}.context_window (or runner.context_window)",
        p.context_window, p.provider
    )
}

/// A failed step's diagnostic summary: one that may come from a window larger than the
/// model's (an overflow, or a local server's empty reply) names the setting to fix.
fn failure_summary(f: StepFailure, p: &LoopParams<'_>) -> String {
    match f {
        StepFailure::ContextOverflow | StepFailure::EmptyReply => format!(
            "{}; if the model's context is smaller than {} tokens, set providers.{}.context_window to its size",
            f.summary(),
            p.context_window,
            p.provider
        ),
        f => f.summary(),
    }
}

/// Read-class calls that run unasked, at most this many at once (`runner.md` 2).
const CONCURRENT_READS: usize = 4;

/// Runs a step's calls and answers every one, results in the model's order; a run of
/// consecutive read-class calls that need no approval runs concurrently, up to
/// [`CONCURRENT_READS`] at a time. A call the run's cancellation reaches before it starts gets
/// an error result without running.
fn run_calls(
    out: &mut RunOutput<'_>,
    calls: &[(String, String, Value)],
    repeats: &mut Repeats,
    records: &mut Vec<Record>,
) -> Vec<Item> {
    let repeated: Vec<bool> = calls.iter().map(|c| repeats.see(&c.1, &c.2)).collect();
    let mut results = Vec::with_capacity(calls.len());
    let mut i = 0;
    while i < calls.len() {
        let mut n = 1;
        while i + n < calls.len()
            && n < CONCURRENT_READS
            && !repeated[i]
            && !repeated[i + n]
            && tool_call::runs_unasked(out, &calls[i].1, &calls[i].2)
            && tool_call::runs_unasked(out, &calls[i + n].1, &calls[i + n].2)
        {
            n += 1;
        }
        let batch = &calls[i..i + n];
        let runs = if n == 1 {
            vec![answer_one(out, &batch[0], repeated[i], records)]
        } else {
            answer_batch(out, batch, records)
        };
        for ((call_id, _, _), run) in batch.iter().zip(runs) {
            records.push(out.record(Body::ToolResult {
                run_id: out.run_id.clone(),
                call_id: call_id.clone(),
                output: run.output.clone(),
                is_error: run.is_error,
            }));
            results.push(Item::ToolResult {
                call_id: call_id.clone(),
                output: run.output,
                is_error: run.is_error,
            });
        }
        i += n;
    }
    results
}

fn call_record(out: &RunOutput<'_>, (call_id, name, input): &(String, String, Value)) -> Record {
    out.record(Body::ToolCall {
        run_id: out.run_id.clone(),
        call_id: call_id.clone(),
        name: name.clone(),
        input: input.clone(),
    })
}

/// What a call gets when the run's activity bound leaves it no room: it does not run.
fn over_activities() -> ToolRun {
    ToolRun {
        output: "refused: the turn reached its bound of tool activities".to_owned(),
        is_error: true,
    }
}

fn answer_one(
    out: &mut RunOutput<'_>,
    call: &(String, String, Value),
    repeated: bool,
    records: &mut Vec<Record>,
) -> ToolRun {
    records.push(call_record(out, call));
    if out.ctx.cancel.is_cancelled() {
        return ToolRun {
            output: "cancelled: the call did not run".to_owned(),
            is_error: true,
        };
    }
    if !out.take_activity() {
        return over_activities();
    }
    if repeated {
        let run = tool_call::refuse(out, &call.1, &call.2, REPEATED, records);
        out.diagnostic(
            DiagnosticCode::RepeatedToolCall,
            "the model asked for the same tool call with the same input 3 or more times in a row; it was not run",
        );
        return run;
    }
    tool_call::call(out, &call.1, &call.2, records)
}

/// Concurrent read calls: every `started` activity in order, the tools on scoped threads,
/// then every final activity in order, so events keep the model's order.
fn answer_batch(
    out: &mut RunOutput<'_>,
    batch: &[(String, String, Value)],
    records: &mut Vec<Record>,
) -> Vec<ToolRun> {
    let prepared: Vec<_> = batch
        .iter()
        .map(|call| {
            records.push(call_record(out, call));
            (!out.ctx.cancel.is_cancelled() && out.take_activity())
                .then(|| tool_call::prepare(out, &call.1, &call.2, records))
        })
        .collect();
    let (cwd, cancel, table) = (&out.ctx.rt.cwd, out.ctx.cancel, out.tools.clone());
    let outcomes: Vec<Option<crate::tools::ToolOutcome>> = std::thread::scope(|scope| {
        let handles: Vec<_> = batch
            .iter()
            .zip(&prepared)
            .map(|((_, name, input), p)| {
                // Only built-ins are read-class (`tool_call::runs_unasked`).
                let tool = match table.lookup(name) {
                    Some(crate::tools::ToolKind::Builtin(b)) => Some(b),
                    _ => None,
                };
                tool.filter(|_| p.as_ref().is_some_and(tool_call::Prepared::may_run))
                    .map(|b| scope.spawn(move || crate::tools::run(b, input, cwd, cancel)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.and_then(|h| h.join().ok()))
            .collect()
    });
    prepared
        .into_iter()
        .zip(outcomes)
        .map(|(p, o)| match p {
            Some(p) => tool_call::complete(out, p, o, records),
            None if out.ctx.cancel.is_cancelled() => ToolRun {
                output: "cancelled: the call did not run".to_owned(),
                is_error: true,
            },
            None => over_activities(),
        })
        .collect()
}

/// Appends the last records with `run_finished` and says what became of them.
fn finish(out: &mut RunOutput<'_>, end: End, mut records: Vec<Record>, degraded: bool) -> Finished {
    let (outcome, code) = match end {
        End::Completed => (RunOutcome::Completed, None),
        End::Cancelled => (RunOutcome::Cancelled, None),
        End::Failed(c) => (RunOutcome::Failed, Some(c)),
    };
    let (outcome, code) = if out.output_lost {
        (RunOutcome::Failed, Some(ErrorCode::OutputUnavailable))
    } else {
        (outcome, code)
    };
    records.push(out.record(Body::RunFinished {
        run_id: out.run_id.clone(),
        outcome,
        error_code: code.map(|c| c.as_str().to_owned()),
    }));
    if degraded || out.append(&records).is_err() {
        return Finished {
            outcome,
            persistence: Persistence::Degraded,
            revision: None,
            error_code: code.or(Some(ErrorCode::PersistenceFailed)),
        };
    }
    // A subagent's history is its own file: the session's revision does not move.
    let revision = if out.subagent.is_some() {
        None
    } else {
        let mut st = out.ctx.state();
        st.attachment
            .as_mut()
            .and_then(|a| session::refresh(&out.ctx.rt, a, &Cancel::default()).ok())
    };
    // Every append succeeded: durable, even if the projection cannot be rebuilt (then the
    // revision is null and the client reopens explicitly).
    Finished {
        outcome,
        persistence: Persistence::Durable,
        revision,
        error_code: code,
    }
}

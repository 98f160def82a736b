//! A step of the run (`runner.md` 2): the checks before its request (the step bound,
//! compaction, the room for a reply), its streamed events into the segment, the records and
//! the step's output, and how it ended.

use super::batch::Callbacks;
use super::compaction::{output_bound, overflowed, Compacted};
use super::content::{CALLS_STOPPED, REPLY_STOPPED};
use super::io::{After, End, Output, StepRequest};
use super::segment::{close_segment, Segment};
use super::shared::Shared;
use crate::history::{ActivityKind, ActivityState, Body, Item};
use crate::providers::model::Usage;
use crate::providers::{ModelEvent, StepFailure};
use crate::util::redact::sanitize_text;
use crate::wire::DiagnosticCode;
use protocol_core::ErrorCode;
use serde_json::Value;

/// A streaming step's output so far.
#[derive(Debug)]
pub struct Streaming {
    /// The assistant text segment.
    pub seg: Segment,
    /// Assistant-side items in the model's order; the text segment's place is `text_at`.
    pub items: Vec<Item>,
    text_at: Option<usize>,
    /// The tool calls: ID, name, input.
    pub calls: Vec<(String, String, Value)>,
    usage: Option<Usage>,
    /// The run's content bound was reached (`content_limit`): the step stops.
    pub over: bool,
    estimate: u64,
    /// Calls the provider made back into the run mid-step (one that runs its own loop).
    pub callbacks: Option<Callbacks>,
}

/// What comes after a step's state changed.
#[derive(Debug)]
pub enum StepNext {
    /// The step streams.
    Stream(Box<Streaming>),
    /// Compact first, for the check at this place.
    Compact(After),
    /// The step called tools: its assistant items and its calls.
    Calls(Vec<Item>, Vec<(String, String, Value)>),
    /// The run ends.
    Finish(End),
}

/// The next step, if the run may take one: compaction first when due, then its request.
pub fn begin(sh: &mut Shared) -> StepNext {
    // A cancelled run asks the provider for nothing more (no step, no compaction).
    if sh.cancelled {
        return StepNext::Finish(End::Cancelled);
    }
    if sh.steps >= sh.cfg.max_steps {
        let summary = format!("the turn reached its bound of {} steps", sh.cfg.max_steps);
        sh.voice.diagnostic(DiagnosticCode::StepLimit, &summary);
        return StepNext::Finish(End::Failed(ErrorCode::ExecutionFailed));
    }
    sh.steps += 1;
    // A conversation that is only this turn's input has nothing to summarize.
    if sh.comp.due(&sh.items) && sh.items.len() > 1 {
        return StepNext::Compact(After::Due);
    }
    before_request(sh, After::Due, Compacted::Skipped)
}

/// Goes on after the checks before a step, at `at`, with what a compaction there did.
pub fn before_request(sh: &mut Shared, at: After, compacted: Compacted) -> StepNext {
    let estimate = sh.comp.estimate(&sh.items);
    let bound = output_bound(sh.cfg.context_window, estimate, sh.cfg.max_output_tokens);
    // No room for a reply: compact first if this step has not, then give up.
    if at == After::Due && bound.is_none() && compacted == Compacted::Skipped && sh.items.len() > 1
    {
        return StepNext::Compact(After::NoRoom);
    }
    match compacted {
        Compacted::Cancelled => return StepNext::Finish(End::Cancelled),
        Compacted::Unstored => {
            sh.degraded = true;
            return StepNext::Finish(End::Failed(ErrorCode::PersistenceFailed));
        }
        Compacted::Done | Compacted::Skipped | Compacted::Failed => {}
    }
    if sh.cancelled {
        return StepNext::Finish(End::Cancelled);
    }
    let Some(max_output_tokens) = bound else {
        let summary = too_small(sh, estimate);
        sh.voice
            .diagnostic(DiagnosticCode::ContextWindowTooSmall, &summary);
        return StepNext::Finish(End::Failed(ErrorCode::ExecutionFailed));
    };
    let seg = Segment::new(sh.voice.fresh_id("a-"));
    sh.push(Output::Step(StepRequest {
        items: sh.items.clone(),
        max_output_tokens,
    }));
    StepNext::Stream(Box::new(Streaming {
        seg,
        items: Vec::new(),
        text_at: None,
        calls: Vec::new(),
        usage: None,
        over: false,
        estimate,
        callbacks: None,
    }))
}

/// The `context_window_too_small` summary: the window, the estimate, and the settings that
/// set the window.
fn too_small(sh: &Shared, estimate: u64) -> String {
    format!(
        "the context window of {} tokens leaves no room for a reply to this request (about {estimate} tokens); raise providers.{}.context_window (or runner.context_window)",
        sh.cfg.context_window, sh.cfg.provider
    )
}

/// One event of the streaming step: the run keeps what fits its bounds; past them the step
/// stops (`content_limit`).
pub fn on_model(sh: &mut Shared, s: &mut Streaming, ev: ModelEvent) {
    if matches!(ev, ModelEvent::Compacted) {
        if !s.over && sh.take_activity() {
            provider_compacted(sh);
        }
        return;
    }
    let Shared {
        content,
        voice,
        records,
        cfg,
        ..
    } = sh;
    if s.over {
        return;
    }
    let run_id = cfg.run_id.clone();
    match ev {
        ModelEvent::TextDelta(t) => {
            // Control characters alone show nothing (redaction drops them).
            if t.chars().all(|c| c.is_control() && c != '\n' && c != '\t') {
                return;
            }
            let n = content.take_text(&mut s.seg, &t);
            if n > 0 {
                if s.seg.is_empty() {
                    s.text_at = Some(s.items.len());
                    s.items.push(Item::Assistant {
                        text: String::new(),
                    });
                }
                s.seg.push(voice, &t[..n]);
            }
            s.over = n < t.len();
        }
        ModelEvent::ToolCall {
            call_id,
            name,
            input,
        } => {
            s.items.push(Item::ToolCall {
                call_id: call_id.clone(),
                name: name.clone(),
                input: input.clone(),
            });
            s.calls.push((call_id, name, input));
        }
        ModelEvent::ReasoningSummary { id, text } => {
            let text = sanitize_text(&text);
            if !content.take_summary(&text) {
                s.over = true;
                return;
            }
            records.push(voice.record(Body::ReasoningSummary {
                run_id,
                text,
                item_id: Some(id),
                provider_summary: Some(true),
            }));
        }
        ModelEvent::ProviderItem(item) => {
            let provider = cfg.provider.clone();
            records.push(voice.record(Body::ProviderItem {
                run_id,
                provider: provider.clone(),
                item: item.clone(),
            }));
            s.items.push(Item::ProviderItem { provider, item });
        }
        ModelEvent::Usage(u) => s.usage = Some(u),
        // How the step stopped shows in its calls: none ends the turn.
        ModelEvent::Stop(_) | ModelEvent::Compacted => {}
    }
}

/// The provider compacted its own conversation: one `compaction` activity, started then
/// completed at once (the provider keeps its summary; no `compaction` record).
fn provider_compacted(sh: &mut Shared) {
    let id = sh.voice.fresh_id("c-");
    let states = [
        (
            ActivityState::Started,
            "the provider is compacting its conversation",
        ),
        (
            ActivityState::Completed,
            "the provider compacted its conversation",
        ),
    ];
    for (state, summary) in states {
        let (event, record) =
            sh.voice
                .activity(&id, ActivityKind::Compaction, state, "compaction", summary);
        sh.voice.critical(event);
        sh.records.push(record);
    }
}

/// A call came back mid-step: the text streamed so far is a segment of its own (a `tool_use`
/// block ends a segment), reconciled and recorded before the call's records.
pub fn cut_segment(sh: &mut Shared, s: &mut Streaming) {
    if !s.seg.is_empty() {
        s.seg.end(&mut sh.voice);
        if let (Some(i), false) = (s.text_at, s.seg.text.is_empty()) {
            s.items[i] = Item::Assistant {
                text: s.seg.text.clone(),
            };
        }
        close_segment(&mut sh.voice, &mut s.seg, false, &mut sh.records);
    }
    s.text_at = None;
}

/// A retry of the `what` request (`provider` or `summary`) is about to wait.
pub fn on_retry(sh: &mut Shared, what: &str, (attempt, of): (u32, u32), wait_ms: u64) {
    let summary = format!("retrying the {what} request in {wait_ms} ms (retry {attempt} of {of})");
    sh.voice.diagnostic(DiagnosticCode::ProviderRetry, &summary);
}

/// The streaming step ended: its usage is recorded; a step the provider refused as too long
/// compacts and is sent once more.
pub fn ended(sh: &mut Shared, s: Streaming, result: Result<(), StepFailure>) -> StepNext {
    let window = sh.cfg.context_window;
    let result = result.map_err(|f| overflowed(f, s.estimate, window));
    if let Some(u) = s.usage {
        let usage = sh.voice.record(Body::Usage {
            run_id: sh.cfg.run_id.clone(),
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cached_input_tokens: u.cached_input_tokens,
            cache_creation_input_tokens: u.cache_creation_input_tokens,
        });
        sh.records.push(usage);
    }
    if matches!(result, Err(StepFailure::ContextOverflow))
        && !sh.retried
        && sh.records.is_empty()
        && s.items.is_empty()
        && s.seg.is_empty()
        && !sh.cancelled
    {
        sh.retried = true;
        return StepNext::Compact(After::Overflow);
    }
    step_result(sh, s, result)
}

/// After a compaction for an overflow that did not help: the step ends as it did.
pub fn overflow_stays(sh: &mut Shared) -> StepNext {
    let s = Streaming {
        seg: Segment::new(sh.voice.fresh_id("a-")),
        items: Vec::new(),
        text_at: None,
        calls: Vec::new(),
        usage: None,
        over: false,
        estimate: 0,
        callbacks: None,
    };
    step_result(sh, s, Err(StepFailure::ContextOverflow))
}

/// How a step ended: the run stops, or its calls run.
fn step_result(sh: &mut Shared, mut s: Streaming, result: Result<(), StepFailure>) -> StepNext {
    let stopped = match result {
        _ if sh.voice.output_lost => Some(End::Failed(ErrorCode::OutputUnavailable)),
        _ if s.over => {
            sh.voice
                .diagnostic(DiagnosticCode::ContentLimit, REPLY_STOPPED);
            Some(End::Failed(ErrorCode::ContentLimit))
        }
        Err(StepFailure::Cancelled) => Some(End::Cancelled),
        _ if sh.cancelled => Some(End::Cancelled),
        Err(f) => {
            if let Some(code) = f.code() {
                let summary = failure_summary(sh, f);
                sh.voice.diagnostic(code, &summary);
            }
            Some(End::Failed(ErrorCode::ExecutionFailed))
        }
        Ok(()) if s.calls.is_empty() => Some(End::Completed),
        Ok(()) => None,
    };
    // The step's text is complete: the redactor's held-back tail is judged now.
    s.seg.end(&mut sh.voice);
    if let (Some(i), false) = (s.text_at, s.seg.text.is_empty()) {
        s.items[i] = Item::Assistant {
            text: s.seg.text.clone(),
        };
    }
    // Calls whose entries would not fit the run's room do not run.
    let stopped = stopped.or_else(|| {
        (!sh.content.calls_fit(&s.calls, sh.cfg.tool_cards)).then(|| {
            sh.voice
                .diagnostic(DiagnosticCode::ContentLimit, CALLS_STOPPED);
            End::Failed(ErrorCode::ContentLimit)
        })
    });
    if let Some(e) = stopped {
        let partial = !matches!(e, End::Completed);
        close_segment(&mut sh.voice, &mut s.seg, partial, &mut sh.records);
        return StepNext::Finish(e);
    }
    // Tool calls separate assistant segments: reconcile the text so far first.
    close_segment(&mut sh.voice, &mut s.seg, false, &mut sh.records);
    StepNext::Calls(s.items, s.calls)
}

/// A failed step's diagnostic summary: one that may come from a window larger than the
/// model's (an overflow, or a local server's empty reply) names the setting to fix.
fn failure_summary(sh: &Shared, f: StepFailure) -> String {
    match f {
            StepFailure::ContextOverflow | StepFailure::EmptyReply => format!(
                "{}; if the model's context is smaller than {} tokens, set providers.{}.context_window to its size",
                f.summary(),
                sh.cfg.context_window,
                sh.cfg.provider
            ),
            f => f.summary(),
        }
}

//! `claude-subscription` as a [`ModelClient`] (`backend.md` "Claude through the native CLI"):
//! one Claude Code CLI per attached session, spoken to in `stream-json` (`claude_cli.rs` reads
//! and writes its lines). A turn is one step: the user's input goes in, the CLI runs its own
//! loop, and every tool it calls is the `magi` SDK MCP server's, answered through the run
//! ([`StepSink::call_tool`]: our policy, approvals, hooks, records and bounds). Its Messages
//! API events become [`ModelEvent`]s through the Anthropic decoder; `result` ends the step.

use super::anthropic::Decoder;
use super::claude_cli::{self as wire, FromCli, TurnResult};
use super::claude_proc::{spawn, CliProcess, CliSlot, Launch};
use super::model::{
    ModelClient, ModelEvent, ModelRequest, SseEvent, StepFailure, StepSink, StopReason,
    StreamDecoder,
};
use crate::history::Item;
use crate::util::cancel::Cancel;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// How long an interrupted turn may take to give its `result` before signals follow.
pub const INTERRUPT_GRACE: Duration = Duration::from_millis(250);
/// How long the CLI may take to answer the `initialize` control request.
const INIT_BOUND: Duration = Duration::from_secs(30);
/// The `provider_item` that names the CLI conversation a turn ran in.
pub const SESSION_ITEM: &str = "claude_cli_session";

/// The session's CLI as a model client: it takes the CLI from the session's slot for a step
/// and puts it back when the CLI may serve the next turn.
pub struct ClaudeModel {
    launch: Launch,
    slot: CliSlot,
}

impl ClaudeModel {
    /// A client starting CLIs with `launch` and keeping them in `slot` (the session's; none
    /// for a subagent, whose CLI ends with the client).
    #[must_use]
    pub fn new(launch: Launch, slot: Option<CliSlot>) -> Self {
        Self {
            launch,
            slot: slot.unwrap_or_default(),
        }
    }

    fn take(&self) -> Option<CliProcess> {
        self.slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    fn put(&self, p: CliProcess) {
        *self
            .slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(p);
    }
}

/// The arguments of a CLI for `req` (`backend.md`), continuing conversation `uuid` with
/// `--resume` or starting it with `--session-id`.
fn arguments(req: &ModelRequest<'_>, resume: bool, uuid: &str) -> Vec<String> {
    let mut args: Vec<String> = [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--tools",
        "",
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__magi",
        "--permission-prompt-tool",
        "stdio",
        "--model",
        req.model,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if let Some(e) = req.effort {
        args.extend(["--effort".to_owned(), e.to_owned()]);
    }
    let flag = if resume { "--resume" } else { "--session-id" };
    args.extend([
        "--system-prompt".to_owned(),
        req.instructions.to_owned(),
        "--system-prompt-snapshot".to_owned(),
        "off".to_owned(),
        flag.to_owned(),
        uuid.to_owned(),
    ]);
    args
}

/// What the session's history says of its CLI conversation: the UUID its last
/// `claude-subscription` turn ran in, and whether the session holds turns that conversation
/// never saw (before it, or of another provider after it).
fn known(req: &ModelRequest<'_>) -> (Option<String>, bool) {
    let last = req.items.iter().rposition(|i| {
        matches!(i, Item::ProviderItem { provider, item }
            if provider == req.provider && item["type"] == SESSION_ITEM)
    });
    let users: Vec<usize> = (0..req.items.len())
        .filter(|&i| matches!(req.items[i], Item::User { .. }))
        .collect();
    let current = users.last().copied();
    let unseen = users
        .iter()
        .any(|&u| Some(u) != current && last.is_none_or(|l| u > l));
    let uuid = last.and_then(|l| match &req.items[l] {
        Item::ProviderItem { item, .. } => item["uuid"].as_str().map(str::to_owned),
        _ => None,
    });
    (uuid, unseen)
}

/// The first message of a new conversation in a session with earlier turns: the transcript
/// the summary request would render, then the new input.
fn with_transcript(req: &ModelRequest<'_>, budget: usize) -> String {
    let current = req
        .items
        .iter()
        .rposition(|i| matches!(i, Item::User { .. }))
        .unwrap_or(req.items.len());
    let earlier = crate::history::compact::transcript(&req.items[..current], budget);
    format!(
        "The conversation so far, as a transcript:\n\n{earlier}\n\n[new input]\n{}",
        input(req)
    )
}

/// How the `initialize` handshake of a new CLI ended.
enum Handshake {
    Ready,
    /// The CLI could not resume the conversation (it gave a `result` or ended first).
    NoResume,
}

/// Starts the CLI of `req`: resuming `resume` if given and possible, else a new
/// conversation; whether the conversation is new.
fn open(
    turn: &mut Turn<'_, '_>,
    launch: &Launch,
    resume: Option<String>,
    cancel: &Cancel,
) -> Result<(CliProcess, bool), StepFailure> {
    let want = (
        turn.req.model.to_owned(),
        turn.req.effort.map(str::to_owned),
    );
    if let Some(uuid) = resume {
        let args = arguments(turn.req, true, &uuid);
        let mut p = spawn(launch, &args, uuid, want.clone())?;
        if let Handshake::Ready = handshake(turn, &mut p, cancel, true)? {
            return Ok((p, false));
        }
    }
    let uuid = uuid::Uuid::new_v4().hyphenated().to_string();
    let args = arguments(turn.req, false, &uuid);
    let mut p = spawn(launch, &args, uuid, want)?;
    match handshake(turn, &mut p, cancel, false)? {
        Handshake::Ready => Ok((p, true)),
        Handshake::NoResume => Err(StepFailure::StreamInvalid),
    }
}

/// Sends `initialize` and serves the CLI until it answers (its `magi` handshake comes
/// meanwhile).
fn handshake(
    turn: &mut Turn<'_, '_>,
    p: &mut CliProcess,
    cancel: &Cancel,
    resuming: bool,
) -> Result<Handshake, StepFailure> {
    let id = p.fresh_id("init");
    let sent = p.send(&wire::initialize(&id));
    let end = Instant::now() + INIT_BOUND;
    while sent.is_ok() && Instant::now() < end {
        if cancel.is_cancelled() {
            return Err(StepFailure::Cancelled);
        }
        match p.next(Duration::from_millis(20)) {
            Ok(Some(FromCli::ControlResponse { request_id, ok })) if request_id == id => {
                return if ok {
                    Ok(Handshake::Ready)
                } else {
                    Err(StepFailure::StreamInvalid)
                };
            }
            Ok(Some(FromCli::Result(_))) | Err(_) if resuming => return Ok(Handshake::NoResume),
            Ok(Some(line)) => {
                turn.line(p, line)?;
            }
            Ok(None) => {}
            Err(e) => return Err(e),
        }
    }
    if resuming {
        return Ok(Handshake::NoResume);
    }
    Err(StepFailure::Unreachable)
}

/// One turn in progress: the step's sink, the tools offered and the Messages decoder of the
/// CLI's current request.
struct Turn<'s, 'r> {
    sink: &'s mut dyn StepSink,
    req: &'r ModelRequest<'r>,
    decoder: Decoder,
}

impl Turn<'_, '_> {
    /// Acts on one line; the turn's end when it is the `result`.
    fn line(
        &mut self,
        p: &mut CliProcess,
        line: FromCli,
    ) -> Result<Option<TurnResult>, StepFailure> {
        match line {
            FromCli::McpMessage {
                request_id,
                message,
            } => {
                // Every control request is answered, a notification's too (the CLI waits).
                let answer = self.mcp(&message).unwrap_or_else(
                    || json!({"jsonrpc": "2.0", "id": message.get("id"), "result": {}}),
                );
                p.send(&wire::mcp_response(&request_id, &answer))?;
            }
            FromCli::CanUseTool { request_id } => p.send(&wire::deny(&request_id))?,
            FromCli::Unsupported { request_id } => p.send(&wire::unsupported(&request_id))?,
            FromCli::Stream(event) => self.stream(&event)?,
            FromCli::Result(r) => return Ok(Some(r)),
            FromCli::System { subtype, line } => self.system(&subtype, &line),
            FromCli::ControlResponse { .. } | FromCli::Assistant { .. } | FromCli::Other => {}
        }
        Ok(None)
    }

    /// The `magi` server's answer to `message`: its handshake, its tools (the turn's), a call
    /// through the run; `None` for a notification.
    fn mcp(&mut self, message: &Value) -> Option<Value> {
        let id = message.get("id")?.clone();
        let result = match message.get("method").and_then(Value::as_str)? {
            "initialize" => initialize_result(message),
            "tools/list" => tools(self.req),
            "tools/call" => {
                let params = message.get("params");
                let name = params
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let input = params
                    .and_then(|p| p.get("arguments"))
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                let call = self.sink.call_tool(wire::tool_use_id(message), name, input);
                let (text, is_error) = match call {
                    Ok(out) => (out, false),
                    Err(why) => (why, true),
                };
                json!({"content": [{"type": "text", "text": text}], "isError": is_error})
            }
            _ => json!({}),
        };
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    /// A `system` line: the CLI's retry is said as ours is (`provider_retry`), its own
    /// compaction is a `compaction` activity; the rest says nothing to the client.
    fn system(&mut self, subtype: &str, line: &Value) {
        let n = |k: &str| line.get(k).and_then(Value::as_u64).unwrap_or(0);
        match subtype {
            "api_retry" => {
                let attempt = u32::try_from(n("attempt")).unwrap_or(u32::MAX);
                let of = u32::try_from(n("max_retries")).unwrap_or(u32::MAX);
                let wait = Duration::from_millis(n("retry_delay_ms"));
                self.sink.retry(attempt, of, wait);
            }
            "compact_boundary" => {
                self.sink.event(ModelEvent::Compacted);
            }
            _ => {}
        }
    }

    /// One Messages API event: a new request starts a new decoder; text and reasoning go out,
    /// the CLI's own tool calls and stops do not (its `magi` calls come as `tools/call`).
    fn stream(&mut self, event: &Value) -> Result<(), StepFailure> {
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind == "message_start" {
            self.decoder = Decoder::new();
        }
        let sse = SseEvent {
            event: Some(kind.to_owned()),
            data: event.to_string(),
        };
        // The CLI is the API's client and judges its stream; an event our decoder would
        // refuse shows nothing rather than failing a turn the CLI goes on with.
        let events = self.decoder.event(&sse).unwrap_or_default();
        for ev in events {
            let shown = matches!(
                ev,
                ModelEvent::TextDelta(_) | ModelEvent::ReasoningSummary { .. }
            );
            if shown && !self.sink.event(ev) {
                return Err(StepFailure::Cancelled);
            }
        }
        self.sink.flush();
        Ok(())
    }
}

/// The `magi` server's `initialize` result, at the client's protocol revision.
fn initialize_result(message: &Value) -> Value {
    let version = message
        .get("params")
        .and_then(|p| p.get("protocolVersion"))
        .cloned()
        .unwrap_or_else(|| json!("2025-06-18"));
    json!({"protocolVersion": version, "capabilities": {"tools": {}},
        "serverInfo": {"name": wire::SERVER, "version": env!("CARGO_PKG_VERSION")}})
}

/// The turn's tools as the `magi` server lists them; a name the CLI would make longer than
/// 64 bytes (`mcp__magi__<name>`) is left out.
fn tools(req: &ModelRequest<'_>) -> Value {
    let list: Vec<Value> = req
        .tools
        .iter()
        .filter(|t| t.name.len() + "mcp__magi__".len() <= 64)
        .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema}))
        .collect();
    json!({"tools": list})
}

/// The turn's input: the conversation's last user text.
fn input(req: &ModelRequest<'_>) -> String {
    req.items
        .iter()
        .rev()
        .find_map(|i| match i {
            Item::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

impl ModelClient for ClaudeModel {
    fn step(
        &mut self,
        req: &ModelRequest<'_>,
        cancel: &Cancel,
        sink: &mut dyn StepSink,
    ) -> Result<(), StepFailure> {
        let want = (req.model.to_owned(), req.effort.map(str::to_owned));
        let (seen, unseen) = known(req);
        // A conversation that missed turns cannot go on: a new one starts from the transcript.
        let held = self.take().filter(|_| !unseen);
        let resume = if unseen {
            None
        } else {
            held.as_ref().map(|p| p.uuid.clone()).or(seen)
        };
        let held = held.filter(|p| p.started_with == want);
        let mut turn = Turn {
            sink,
            req,
            decoder: Decoder::new(),
        };
        let (mut p, new) = match held {
            Some(p) => (p, false),
            None => open(&mut turn, &self.launch, resume, cancel)?,
        };
        let earlier = req
            .items
            .iter()
            .filter(|i| matches!(i, Item::User { .. }))
            .count()
            > 1;
        let message = if new && earlier {
            with_transcript(req, self.launch.transcript_budget)
        } else {
            input(req)
        };
        let item = json!({"type": SESSION_ITEM, "uuid": p.uuid});
        if !turn.sink.event(ModelEvent::ProviderItem(item)) {
            return Err(StepFailure::Cancelled);
        }
        p.send(&wire::user_message(&message))?;
        match run_turn(&mut turn, &mut p, cancel) {
            Ended::Result(r) => {
                let outcome = outcome(&r, turn.sink);
                // A CLI that gave its result serves the next turn.
                self.put(p);
                outcome
            }
            Ended::Interrupted { kept } => {
                if kept {
                    self.put(p);
                }
                Err(StepFailure::Cancelled)
            }
            // A CLI that broke off is not kept: the next turn resumes in a new one.
            Ended::Broken(e) => Err(e),
        }
    }
}

/// How a turn's reading ended.
enum Ended {
    /// Its `result`.
    Result(TurnResult),
    /// Cancelled; `kept` when the interrupt gave a `result` in time, so the CLI lives on.
    Interrupted { kept: bool },
    /// The CLI ended or wrote what it never writes.
    Broken(StepFailure),
}

/// Reads the turn to its `result`; on `cancel`, interrupts it and gives it
/// [`INTERRUPT_GRACE`] before the signals.
fn run_turn(turn: &mut Turn<'_, '_>, p: &mut CliProcess, cancel: &Cancel) -> Ended {
    loop {
        if cancel.is_cancelled() {
            let id = p.fresh_id("interrupt");
            // A CLI that cannot take the interrupt is ended by the signals below.
            let _ = p.send(&wire::interrupt(&id));
            let end = Instant::now() + INTERRUPT_GRACE;
            while Instant::now() < end {
                match p.next(Duration::from_millis(10)) {
                    Ok(Some(FromCli::Result(_))) => return Ended::Interrupted { kept: true },
                    Err(_) => break,
                    Ok(_) => {}
                }
            }
            p.signal_out();
            return Ended::Interrupted { kept: false };
        }
        let line = match p.next(Duration::from_millis(20)) {
            Ok(Some(line)) => line,
            Ok(None) => continue,
            Err(e) => return Ended::Broken(e),
        };
        match turn.line(p, line) {
            Ok(Some(r)) => return Ended::Result(r),
            Ok(None) => {}
            Err(StepFailure::Cancelled) => {}
            Err(e) => return Ended::Broken(e),
        }
    }
}

/// How the turn ended: its usage, then the stop; an error `result` fails the step.
fn outcome(r: &TurnResult, sink: &mut dyn StepSink) -> Result<(), StepFailure> {
    if let Some((input_tokens, output_tokens)) = r.usage {
        sink.event(ModelEvent::Usage(super::model::Usage {
            input_tokens,
            output_tokens,
            cached_input_tokens: None,
            cache_creation_input_tokens: None,
        }));
    }
    if !r.is_error {
        sink.event(ModelEvent::Stop(StopReason::EndTurn));
        return Ok(());
    }
    Err(match r.api_error_status {
        Some(401 | 403) => StepFailure::ClaudeLogin,
        Some(n) => StepFailure::Status(n),
        None => StepFailure::Remote,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::ToolSpec;
    use crate::providers::model::Thinking;

    fn req<'a>(items: &'a [Item], tools: &'a [ToolSpec]) -> ModelRequest<'a> {
        ModelRequest {
            model: "sonnet",
            provider: "claude-subscription",
            instructions: "be brief",
            items,
            tools,
            effort: None,
            thinking: Thinking::Adaptive,
            max_output_tokens: 1_000,
        }
    }

    fn user(t: &str) -> Item {
        Item::User { text: t.into() }
    }

    fn said(t: &str) -> Item {
        Item::Assistant { text: t.into() }
    }

    fn session(provider: &str, uuid: &str) -> Item {
        Item::ProviderItem {
            provider: provider.into(),
            item: json!({"type": SESSION_ITEM, "uuid": uuid}),
        }
    }

    #[test]
    fn what_the_cli_saw_decides_resume_or_transcript() {
        // A first turn: nothing to resume, nothing unseen.
        assert_eq!(known(&req(&[user("a")], &[])), (None, false));
        // Every earlier turn ran in conversation u1: resume it.
        let items = [
            user("a"),
            session("claude-subscription", "u1"),
            said("x"),
            user("b"),
        ];
        assert_eq!(known(&req(&items, &[])), (Some("u1".into()), false));
        // A turn of another provider after it: the CLI never saw it.
        let items = [
            user("a"),
            session("claude-subscription", "u1"),
            said("x"),
            user("b"),
            said("y"),
            user("c"),
        ];
        assert_eq!(known(&req(&items, &[])), (Some("u1".into()), true));
        // Earlier turns and no conversation (another provider's item does not count).
        let items = [user("a"), session("anthropic", "u9"), said("x"), user("b")];
        assert_eq!(known(&req(&items, &[])), (None, true));
    }

    #[test]
    fn the_transcript_holds_the_earlier_turns_then_the_new_input() {
        let items = [user("first"), said("one"), user("second")];
        let m = with_transcript(&req(&items, &[]), 10_000);
        assert!(
            m.contains("[user]\nfirst") && m.contains("[assistant]\none"),
            "{m}"
        );
        assert!(m.ends_with("[new input]\nsecond"), "{m}");
        assert!(!m.contains("[user]\nsecond"), "{m}");
    }

    #[test]
    fn a_tool_name_the_cli_would_make_longer_than_64_bytes_is_left_out() {
        let spec = |n: usize| ToolSpec {
            name: "t".repeat(n),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        };
        // `mcp__magi__` is 11 bytes: 53 is the longest name that fits.
        let list = tools(&req(&[], &[spec(53), spec(54)]));
        let names: Vec<usize> = list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().len())
            .collect();
        assert_eq!(names, [53]);
    }

    #[test]
    fn the_arguments_are_the_specs() {
        let mut r = req(&[], &[]);
        r.effort = Some("high");
        let a = arguments(&r, true, "u1");
        let joined = a.join(" ");
        assert!(
            joined.starts_with(
                "-p --input-format stream-json --output-format stream-json --verbose \
             --include-partial-messages --tools  --strict-mcp-config --allowedTools mcp__magi \
             --permission-prompt-tool stdio --model sonnet --effort high --system-prompt be brief \
             --system-prompt-snapshot off --resume u1"
            ),
            "{joined}"
        );
        assert_eq!(arguments(&req(&[], &[]), false, "u2").last().unwrap(), "u2");
        assert!(arguments(&req(&[], &[]), false, "u2").contains(&"--session-id".to_owned()));
    }
}

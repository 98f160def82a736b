//! The Anthropic Messages API: the request body built from a [`ModelRequest`] and a sans-IO
//! decoder of its stream into [`ModelEvent`]s (`runner.md` 1, `provider-streams.md` 1).

use super::model::{
    is_overflow, DecodeError, Item, ModelEvent, ModelRequest, SseEvent, StopReason, StreamDecoder,
    Thinking, Usage,
};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The request path under the provider's base URL.
pub const PATH: &str = "/v1/messages";

/// Most bytes one content block may accumulate (tool input JSON, thinking text plus signature,
/// a redacted block's data) before the stream is rejected.
pub const BLOCK_BYTES: usize = 8 << 20;

/// Most bytes all content blocks of one step may accumulate together.
pub const STEP_BYTES: usize = 16 << 20;

/// Most content blocks one step may open.
pub const BLOCKS: usize = 4096;

/// The thinking budget of an explicit effort for a `"thinking": "budget"` model (`runner.md`
/// 1); `None` for a value without one (then no thinking field is sent).
#[must_use]
pub fn thinking_budget(effort: &str) -> Option<u64> {
    Some(match effort {
        "low" => 4_096,
        "medium" => 10_240,
        "high" => 24_576,
        "xhigh" => 49_152,
        "max" => 65_536,
        _ => return None,
    })
}

/// The `cache_control` of a breakpoint.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The streaming request body of one step.
#[must_use]
pub fn request_body(req: &ModelRequest<'_>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), req.model.into());
    let mut max_tokens = req.max_output_tokens;
    match (req.effort, req.thinking) {
        (None, _) => {}
        (Some(effort), Thinking::Adaptive) => {
            body.insert(
                "thinking".into(),
                json!({"type": "adaptive", "display": "summarized"}),
            );
            body.insert("output_config".into(), json!({ "effort": effort }));
        }
        (Some(effort), Thinking::Budget) => {
            if let Some(budget) = thinking_budget(effort) {
                body.insert(
                    "thinking".into(),
                    json!({"type": "enabled", "budget_tokens": budget}),
                );
                // The budget counts against max_tokens, so the reply keeps its own bound.
                max_tokens = budget.saturating_add(req.max_output_tokens);
            }
        }
    }
    body.insert("max_tokens".into(), max_tokens.into());
    body.insert("stream".into(), true.into());
    // Two cache breakpoints (`runner.md` 1): the system prompt's one block, and the newest
    // message's last block, so each step reads the previous step's prefix from the cache.
    if !req.instructions.is_empty() {
        let block = json!({"type": "text", "text": req.instructions, "cache_control": ephemeral()});
        body.insert("system".into(), json!([block]));
    }
    let mut messages = messages(req);
    let newest = messages
        .last_mut()
        .and_then(|m| m["content"].as_array_mut());
    if let Some(Value::Object(block)) = newest.and_then(|c| c.last_mut()) {
        block.insert("cache_control".into(), ephemeral());
    }
    body.insert("messages".into(), messages.into());
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description, "input_schema": t.input_schema})
            })
            .collect();
        body.insert("tools".into(), tools.into());
    }
    Value::Object(body)
}

/// The `messages` array: items become content blocks, and adjacent blocks of one role share
/// one message, so roles alternate and every `tool_result` precedes the text it travels with.
fn messages(req: &ModelRequest<'_>) -> Vec<Value> {
    let mut out: Vec<(&str, Vec<Value>)> = Vec::new();
    for item in req.items {
        let (role, block) = match item {
            // The API rejects empty and whitespace-only text blocks.
            Item::User { text } | Item::Assistant { text } if text.trim().is_empty() => continue,
            Item::User { text } => ("user", json!({"type": "text", "text": text})),
            Item::Assistant { text } => ("assistant", json!({"type": "text", "text": text})),
            Item::ToolCall {
                call_id,
                name,
                input,
            } => {
                // The API takes only an object; a raw arguments string was never valid input.
                let input = if input.is_object() {
                    input.clone()
                } else {
                    json!({})
                };
                (
                    "assistant",
                    json!({"type": "tool_use", "id": call_id, "name": name, "input": input}),
                )
            }
            Item::ToolResult {
                call_id,
                output,
                is_error,
            } => (
                "user",
                json!({"type": "tool_result", "tool_use_id": call_id, "content": output,
                       "is_error": is_error}),
            ),
            Item::ProviderItem { provider, item } if provider == req.provider => {
                ("assistant", item.clone())
            }
            Item::ProviderItem { .. } => continue,
        };
        match out.last_mut() {
            Some((r, blocks)) if *r == role => {
                if is_tool_result(&block) {
                    let at = blocks
                        .iter()
                        .position(|b| !is_tool_result(b))
                        .unwrap_or(blocks.len());
                    blocks.insert(at, block);
                } else {
                    blocks.push(block);
                }
            }
            _ => out.push((role, vec![block])),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn is_tool_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_result")
}

/// Whether a non-200 response body (`{"type":"error","error":{"type","message"}}`) reports a
/// context overflow.
#[must_use]
pub fn error_body_is_overflow(body: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    let err = v.get("error");
    let field = |k: &str| err.and_then(|e| e.get(k)).and_then(Value::as_str);
    is_overflow(field("type"), field("message"))
}

/// One content block while it streams.
#[derive(Debug)]
enum Block {
    /// Text: each delta goes out at once.
    Text,
    /// A tool call whose input JSON arrives in fragments.
    ToolUse {
        id: String,
        name: String,
        /// The input of `content_block_start`, used when no fragment arrives.
        start: Value,
        json: String,
    },
    /// A thinking block: its start object, and the text and signature so far.
    Thinking {
        block: Map<String, Value>,
        thinking: String,
        signature: String,
    },
    /// A redacted thinking block, complete at its start, sent on at its stop.
    Redacted(Value),
    /// A block type this decoder does not read (server tools, future types).
    Ignored,
    /// Stopped: nothing more may arrive for it.
    Closed,
}

/// Decodes one Messages stream: text deltas at once, tool calls and thinking blocks when they
/// stop, usage and the stop reason at `message_stop`.
#[derive(Debug, Default)]
pub struct Decoder {
    started: bool,
    finished: bool,
    failed: Option<DecodeError>,
    blocks: HashMap<u64, Block>,
    /// Bytes all blocks accumulated so far.
    held: usize,
    input: u64,
    output: u64,
    cache_read: Option<u64>,
    cache_creation: Option<u64>,
    stop: Option<StopReason>,
}

impl Decoder {
    /// A decoder at the start of a stream.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts `add` more bytes held by a block that then holds `block_len`.
    fn hold(&mut self, block_len: usize, add: usize) -> Result<(), DecodeError> {
        let held = self.held.saturating_add(add);
        if block_len > BLOCK_BYTES || held > STEP_BYTES {
            return Err(DecodeError::Invalid);
        }
        self.held = held;
        Ok(())
    }

    fn decode(&mut self, ev: &SseEvent) -> Result<Vec<ModelEvent>, DecodeError> {
        // A ping's data is never read, so an odd one cannot fail the step.
        if ev.event.as_deref() == Some("ping") {
            return Ok(Vec::new());
        }
        let v: Value = serde_json::from_str(&ev.data).map_err(|_| DecodeError::Invalid)?;
        let obj = v.as_object().ok_or(DecodeError::Invalid)?;
        let kind = obj
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .ok_or(DecodeError::Invalid)?;
        let in_message = matches!(
            kind,
            "content_block_start"
                | "content_block_delta"
                | "content_block_stop"
                | "message_delta"
                | "message_stop"
        );
        if in_message && !self.started {
            return Err(DecodeError::Invalid);
        }
        match kind {
            "message_start" => {
                if self.started {
                    return Err(DecodeError::Invalid);
                }
                self.started = true;
                let usage = obj.get("message").and_then(|m| m.get("usage"));
                self.read_usage(usage);
                Ok(Vec::new())
            }
            "content_block_start" => self.block_start(obj),
            "content_block_delta" => self.block_delta(obj),
            "content_block_stop" => self.block_stop(obj),
            "message_delta" => self.message_delta(obj),
            "message_stop" => self.message_stop(),
            "error" => Err(remote_error(obj)),
            _ => Ok(Vec::new()),
        }
    }

    /// Takes the stop reason and the cumulative usage a `message_delta` reports.
    fn message_delta(&mut self, obj: &Map<String, Value>) -> Result<Vec<ModelEvent>, DecodeError> {
        let reason = obj
            .get("delta")
            .and_then(|d| d.get("stop_reason"))
            .and_then(Value::as_str);
        if let Some(reason) = reason {
            self.stop = Some(match reason {
                "end_turn" | "stop_sequence" => StopReason::EndTurn,
                "tool_use" => StopReason::ToolUse,
                "max_tokens" => StopReason::MaxTokens,
                _ => StopReason::Other,
            });
        }
        self.read_usage(obj.get("usage"));
        Ok(Vec::new())
    }

    /// Ends the step at `message_stop`: its usage (cache reads and writes count as input) and
    /// stop reason, refused while a block is still open.
    fn message_stop(&mut self) -> Result<Vec<ModelEvent>, DecodeError> {
        // A block left open would lose a tool call or a thinking block.
        if self.blocks.values().any(|b| !matches!(b, Block::Closed)) {
            return Err(DecodeError::Invalid);
        }
        self.finished = true;
        let usage = Usage {
            input_tokens: self
                .input
                .saturating_add(self.cache_read.unwrap_or(0))
                .saturating_add(self.cache_creation.unwrap_or(0)),
            output_tokens: self.output,
            cached_input_tokens: self.cache_read,
            cache_creation_input_tokens: self.cache_creation,
        };
        Ok(vec![
            ModelEvent::Usage(usage),
            ModelEvent::Stop(self.stop.unwrap_or(StopReason::Other)),
        ])
    }

    /// Takes the counts a `usage` object reports; counts are cumulative, so each replaces the
    /// last.
    fn read_usage(&mut self, usage: Option<&Value>) {
        let Some(u) = usage else { return };
        let count = |k: &str| u.get(k).and_then(Value::as_u64);
        if let Some(n) = count("input_tokens") {
            self.input = n;
        }
        if let Some(n) = count("output_tokens") {
            self.output = n;
        }
        if let Some(n) = count("cache_read_input_tokens") {
            self.cache_read = Some(n);
        }
        if let Some(n) = count("cache_creation_input_tokens") {
            self.cache_creation = Some(n);
        }
    }

    fn block_start(&mut self, obj: &Map<String, Value>) -> Result<Vec<ModelEvent>, DecodeError> {
        let index = index_of(obj)?;
        if self.blocks.contains_key(&index) || self.blocks.len() >= BLOCKS {
            return Err(DecodeError::Invalid);
        }
        let cb = obj
            .get("content_block")
            .and_then(Value::as_object)
            .ok_or(DecodeError::Invalid)?;
        let text_of = |k: &str| -> Result<String, DecodeError> {
            match cb.get(k) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(DecodeError::Invalid),
            }
        };
        let mut out = Vec::new();
        let block = match cb.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = text_of("text")?;
                if !text.is_empty() {
                    out.push(ModelEvent::TextDelta(text));
                }
                Block::Text
            }
            Some("tool_use") => {
                let id = cb.get("id").and_then(Value::as_str);
                let name = cb.get("name").and_then(Value::as_str);
                let (Some(id), Some(name)) = (id, name) else {
                    return Err(DecodeError::Invalid);
                };
                Block::ToolUse {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    start: cb.get("input").cloned().unwrap_or(Value::Null),
                    json: String::new(),
                }
            }
            Some("thinking") => {
                let thinking = text_of("thinking")?;
                let signature = text_of("signature")?;
                let len = thinking.len() + signature.len();
                self.hold(len, len)?;
                Block::Thinking {
                    block: cb.clone(),
                    thinking,
                    signature,
                }
            }
            Some("redacted_thinking") => {
                let len = cb.get("data").and_then(Value::as_str).map_or(0, str::len);
                self.hold(len, len)?;
                Block::Redacted(Value::Object(cb.clone()))
            }
            Some(_) => Block::Ignored,
            None => return Err(DecodeError::Invalid),
        };
        self.blocks.insert(index, block);
        Ok(out)
    }

    fn block_delta(&mut self, obj: &Map<String, Value>) -> Result<Vec<ModelEvent>, DecodeError> {
        let index = index_of(obj)?;
        let delta = obj
            .get("delta")
            .and_then(Value::as_object)
            .ok_or(DecodeError::Invalid)?;
        let kind = delta
            .get("type")
            .and_then(Value::as_str)
            .ok_or(DecodeError::Invalid)?;
        let field = |k: &str| {
            delta
                .get(k)
                .and_then(Value::as_str)
                .ok_or(DecodeError::Invalid)
        };
        let (held, block) = (&mut self.held, self.blocks.get_mut(&index));
        let (acc, add, len) = match (block, kind) {
            (None | Some(Block::Closed), _) => return Err(DecodeError::Invalid),
            (Some(Block::Ignored | Block::Redacted(_)), _) => return Ok(Vec::new()),
            (Some(Block::Text), "text_delta") => {
                return Ok(vec![ModelEvent::TextDelta(field("text")?.to_owned())]);
            }
            (Some(Block::ToolUse { json, .. }), "input_json_delta") => {
                let add = field("partial_json")?;
                let len = json.len() + add.len();
                (json, add, len)
            }
            (
                Some(Block::Thinking {
                    thinking,
                    signature,
                    ..
                }),
                "thinking_delta" | "signature_delta",
            ) => {
                let len = thinking.len() + signature.len();
                if kind == "thinking_delta" {
                    let add = field("thinking")?;
                    (thinking, add, len + add.len())
                } else {
                    let add = field("signature")?;
                    (signature, add, len + add.len())
                }
            }
            (_, "text_delta" | "input_json_delta" | "thinking_delta" | "signature_delta") => {
                return Err(DecodeError::Invalid);
            }
            // Other deltas (citations, future types) carry nothing this decoder keeps.
            _ => return Ok(Vec::new()),
        };
        let total = held.saturating_add(add.len());
        if len > BLOCK_BYTES || total > STEP_BYTES {
            return Err(DecodeError::Invalid);
        }
        *held = total;
        acc.push_str(add);
        Ok(Vec::new())
    }

    fn block_stop(&mut self, obj: &Map<String, Value>) -> Result<Vec<ModelEvent>, DecodeError> {
        let index = index_of(obj)?;
        let slot = self.blocks.get_mut(&index).ok_or(DecodeError::Invalid)?;
        match std::mem::replace(slot, Block::Closed) {
            Block::Closed => Err(DecodeError::Invalid),
            Block::Text | Block::Ignored => Ok(Vec::new()),
            Block::Redacted(block) => Ok(vec![ModelEvent::ProviderItem(block)]),
            Block::ToolUse {
                id,
                name,
                start,
                json,
            } => {
                let input = if json.is_empty() {
                    match start {
                        v @ Value::Object(_) => v,
                        _ => json!({}),
                    }
                } else {
                    // Input that is not a JSON object is the model's mistake, not a broken
                    // stream: the call gets an "invalid input" error result, as on every wire
                    // (`runner.md` 2).
                    super::model::parse_arguments(&json)
                };
                Ok(vec![ModelEvent::ToolCall {
                    call_id: id,
                    name,
                    input,
                }])
            }
            Block::Thinking {
                mut block,
                thinking,
                signature,
            } => {
                let mut out = Vec::new();
                if !thinking.is_empty() {
                    out.push(ModelEvent::ReasoningSummary {
                        id: index.to_string(),
                        text: thinking.clone(),
                    });
                }
                block.insert("thinking".into(), thinking.into());
                block.insert("signature".into(), signature.into());
                out.push(ModelEvent::ProviderItem(Value::Object(block)));
                Ok(out)
            }
        }
    }
}

/// An `error` event as a decode error: an overflow when its type or message says so, else a
/// remote failure.
fn remote_error(obj: &Map<String, Value>) -> DecodeError {
    let err = obj.get("error");
    let field = |k: &str| err.and_then(|e| e.get(k)).and_then(Value::as_str);
    if is_overflow(field("type"), field("message")) {
        DecodeError::ContextOverflow
    } else {
        DecodeError::Remote
    }
}

fn index_of(obj: &Map<String, Value>) -> Result<u64, DecodeError> {
    obj.get("index")
        .and_then(Value::as_u64)
        .ok_or(DecodeError::Invalid)
}

impl StreamDecoder for Decoder {
    fn event(&mut self, ev: &SseEvent) -> Result<Vec<ModelEvent>, DecodeError> {
        if self.finished {
            return Ok(Vec::new());
        }
        if let Some(e) = self.failed {
            return Err(e);
        }
        let r = self.decode(ev);
        if let Err(e) = r {
            self.failed = Some(e);
        }
        r
    }

    fn finished(&self) -> bool {
        self.finished
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::ToolSpec;
    use super::*;
    use crate::providers::fuzzing::events::usage;
    use crate::providers::fuzzing::{decode_chunks, Outcome};

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/src/providers/fixtures/anthropic/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(path).unwrap()
    }

    fn decoded(name: &str) -> Outcome {
        decode_chunks(&[&fixture(name)])
    }

    fn text(s: &str) -> ModelEvent {
        ModelEvent::TextDelta(s.into())
    }

    #[test]
    fn text_then_tool_use_stream() {
        let mut want: Vec<ModelEvent> = [
            "Okay",
            ",",
            " let",
            "'s",
            " check",
            " the",
            " weather",
            " for",
            " San",
            " Francisco",
            ",",
            " CA",
            ":",
        ]
        .into_iter()
        .map(text)
        .collect();
        want.extend([
            ModelEvent::ToolCall {
                call_id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                name: "get_weather".into(),
                input: json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
            },
            usage(472, 89, None),
            ModelEvent::Stop(StopReason::ToolUse),
        ]);
        assert_eq!(
            decoded("text_tool_use.sse"),
            Outcome::Model(want, None, true)
        );
    }

    #[test]
    fn thinking_stream_keeps_the_signed_block() {
        let thought = "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n\
                       1071 = 2 × 462 + 147\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\n\
                       The remainder is 0, so GCD(1071, 462) = 21.";
        let want = vec![
            ModelEvent::ReasoningSummary {
                id: "0".into(),
                text: thought.into(),
            },
            ModelEvent::ProviderItem(json!({
                "type": "thinking",
                "thinking": thought,
                "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds...",
            })),
            text("The greatest common divisor of 1071 and 462 is **21**."),
            usage(0, 0, None),
            ModelEvent::Stop(StopReason::EndTurn),
        ];
        assert_eq!(decoded("thinking.sse"), Outcome::Model(want, None, true));
    }

    #[test]
    fn omitted_thinking_is_passed_back_without_a_summary() {
        // Cached input is part of the request's input; cache fields and stop_details are
        // extra fields read leniently.
        let want = vec![
            ModelEvent::ProviderItem(json!({
                "type": "thinking",
                "thinking": "",
                "signature": "EosnCkYICxIMMb3LzNrMu...",
            })),
            text("21"),
            ModelEvent::Usage(Usage {
                input_tokens: 112,
                output_tokens: 40,
                cached_input_tokens: Some(100),
                // The stream reports no cache write, as 0.
                cache_creation_input_tokens: Some(0),
            }),
            ModelEvent::Stop(StopReason::EndTurn),
        ];
        assert_eq!(
            decoded("thinking_omitted.sse"),
            Outcome::Model(want, None, true)
        );
    }

    #[test]
    fn overloaded_error_after_200_fails_the_step() {
        assert_eq!(
            decoded("overloaded_error.sse"),
            Outcome::Model(vec![text("Partial")], Some(DecodeError::Remote), false)
        );
    }

    #[test]
    fn pings_anywhere_are_ignored() {
        let want = vec![
            ModelEvent::ToolCall {
                call_id: "toolu_01".into(),
                name: "list_dir".into(),
                input: json!({}),
            },
            usage(5, 7, None),
            ModelEvent::Stop(StopReason::ToolUse),
        ];
        assert_eq!(
            decoded("ping_anywhere.sse"),
            Outcome::Model(want, None, true)
        );
    }

    #[test]
    fn unknown_events_blocks_and_deltas_are_ignored() {
        let want = vec![
            text("Sunny."),
            usage(9, 3, None),
            ModelEvent::Stop(StopReason::Other),
        ];
        assert_eq!(
            decoded("unknown_event.sse"),
            Outcome::Model(want, None, true)
        );
    }

    fn ev(v: &Value) -> SseEvent {
        SseEvent {
            event: v["type"].as_str().map(Into::into),
            data: v.to_string(),
        }
    }

    fn started() -> Decoder {
        let mut d = Decoder::new();
        let start = json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}});
        assert_eq!(d.event(&ev(&start)), Ok(vec![]));
        d
    }

    fn block_start(index: u64, block: &Value) -> SseEvent {
        ev(&json!({"type": "content_block_start", "index": index, "content_block": block}))
    }

    fn delta(index: u64, delta: &Value) -> SseEvent {
        ev(&json!({"type": "content_block_delta", "index": index, "delta": delta}))
    }

    fn stop(index: u64) -> SseEvent {
        ev(&json!({"type": "content_block_stop", "index": index}))
    }

    fn tool(index: u64) -> SseEvent {
        block_start(
            index,
            &json!({"type": "tool_use", "id": "t", "name": "n", "input": {}}),
        )
    }

    fn json_delta(index: u64, partial: &str) -> SseEvent {
        delta(
            index,
            &json!({"type": "input_json_delta", "partial_json": partial}),
        )
    }

    fn raw(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: Some(event.into()),
            data: data.into(),
        }
    }

    #[test]
    fn error_events_say_overflow_or_remote() {
        let overflow = json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "prompt is too long: 201234 tokens > 200000 maximum"}});
        assert_eq!(
            started().event(&ev(&overflow)),
            Err(DecodeError::ContextOverflow)
        );
        let other = json!({"type": "error", "error": {"type": "api_error", "message": "x"}});
        let mut d = started();
        assert_eq!(d.event(&ev(&other)), Err(DecodeError::Remote));
        // Sticky: the step has failed, whatever comes next.
        assert_eq!(d.event(&tool(0)), Err(DecodeError::Remote));
        // An error event before message_start still reports the provider's error.
        assert_eq!(Decoder::new().event(&ev(&other)), Err(DecodeError::Remote));
    }

    #[test]
    fn impossible_sequences_are_invalid() {
        let invalid = Err(DecodeError::Invalid);
        assert_eq!(started().event(&raw("message_delta", "{not json")), invalid);
        assert_eq!(started().event(&raw("message_delta", "[1]")), invalid);
        assert_eq!(started().event(&raw("x", "{\"index\":0}")), Ok(vec![]));
        assert_eq!(Decoder::new().event(&SseEvent::default()), invalid);
        assert_eq!(
            Decoder::new().event(&tool(0)),
            invalid,
            "before message_start"
        );
        let mut d = started();
        let again = json!({"type": "message_start", "message": {}});
        assert_eq!(d.event(&ev(&again)), invalid);
        assert_eq!(started().event(&stop(0)), invalid, "stop before start");
        assert_eq!(
            started().event(&json_delta(3, "{}")),
            invalid,
            "unknown index"
        );
        let mut d = started();
        d.event(&tool(0)).unwrap();
        assert_eq!(d.event(&tool(0)), invalid, "index started twice");
        let mut d = started();
        d.event(&tool(0)).unwrap();
        d.event(&stop(0)).unwrap();
        assert_eq!(d.event(&json_delta(0, "{}")), invalid, "delta after stop");
        assert_eq!(d.event(&stop(0)), invalid, "stopped twice");
        let mut d = started();
        d.event(&tool(0)).unwrap();
        let td = json!({"type": "text_delta", "text": "x"});
        assert_eq!(
            d.event(&delta(0, &td)),
            invalid,
            "text delta on a tool block"
        );
        let no_id = block_start(0, &json!({"type": "tool_use", "name": "n"}));
        assert_eq!(
            started().event(&no_id),
            invalid,
            "a tool call without its id"
        );
        let no_index = ev(&json!({"type": "content_block_stop"}));
        assert_eq!(started().event(&no_index), invalid);
        let mut d = started();
        d.event(&tool(0)).unwrap();
        assert_eq!(
            d.event(&ev(&json!({"type": "message_stop"}))),
            invalid,
            "a block left open"
        );
        assert!(!d.finished());
    }

    #[test]
    fn tool_input_must_be_an_object() {
        let run = |parts: &[&str]| {
            let mut d = started();
            d.event(&tool(0)).unwrap();
            for p in parts {
                d.event(&json_delta(0, p))?;
            }
            d.event(&stop(0))
        };
        let call = |input: Value| {
            Ok(vec![ModelEvent::ToolCall {
                call_id: "t".into(),
                name: "n".into(),
                input,
            }])
        };
        assert_eq!(run(&[]), call(json!({})));
        assert_eq!(run(&["", ""]), call(json!({})));
        assert_eq!(run(&["{\"a\":", "[1]}"]), call(json!({"a": [1]})));
        // Input that does not parse as an object is kept as its text: the call is answered
        // with an "invalid input" error result, the stream goes on.
        assert_eq!(run(&["[1]"]), call(json!("[1]")));
        assert_eq!(run(&["{\"a\":"]), call(json!("{\"a\":")));
        assert_eq!(run(&["\"s\""]), call(json!("\"s\"")));
        // A whole input in content_block_start and no fragments is taken as it is.
        let mut d = started();
        let whole = json!({"type": "tool_use", "id": "t", "name": "n", "input": {"p": 1}});
        d.event(&block_start(0, &whole)).unwrap();
        assert_eq!(d.event(&stop(0)), call(json!({"p": 1})));
    }

    #[test]
    fn redacted_thinking_and_stop_reasons() {
        let mut d = started();
        let block = json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"});
        assert_eq!(d.event(&block_start(0, &block)), Ok(vec![]));
        assert_eq!(d.event(&stop(0)), Ok(vec![ModelEvent::ProviderItem(block)]));
        for (reason, want) in [
            ("end_turn", StopReason::EndTurn),
            ("stop_sequence", StopReason::EndTurn),
            ("tool_use", StopReason::ToolUse),
            ("max_tokens", StopReason::MaxTokens),
            ("refusal", StopReason::Other),
        ] {
            let mut d = started();
            let md = json!({"type": "message_delta", "delta": {"stop_reason": reason},
                            "usage": {"output_tokens": 4}});
            d.event(&ev(&md)).unwrap();
            let last = json!({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 9}});
            d.event(&ev(&last)).unwrap();
            assert_eq!(
                d.event(&ev(&json!({"type": "message_stop"}))),
                Ok(vec![usage(1, 9, None), ModelEvent::Stop(want)])
            );
            assert!(d.finished());
            // After message_stop nothing is read.
            assert_eq!(d.event(&raw("error", "garbage")), Ok(vec![]));
        }
    }

    /// A tool input of exactly `len` bytes: `{"a":"xx…"}`.
    fn input_of(len: usize) -> String {
        format!("{{\"a\":\"{}\"}}", "x".repeat(len - 8))
    }

    #[test]
    fn a_block_holds_at_most_block_bytes() {
        let mut d = started();
        d.event(&tool(0)).unwrap();
        let edge = input_of(BLOCK_BYTES);
        assert_eq!(d.event(&json_delta(0, &edge)), Ok(vec![]));
        assert_eq!(d.event(&stop(0)).unwrap().len(), 1);
        let mut d = started();
        d.event(&tool(0)).unwrap();
        d.event(&json_delta(0, &edge[..BLOCK_BYTES - 1])).unwrap();
        assert_eq!(d.event(&json_delta(0, "}}")), Err(DecodeError::Invalid));
        // Thinking text and signature count together.
        let mut d = started();
        d.event(&block_start(
            0,
            &json!({"type": "thinking", "thinking": "ab"}),
        ))
        .unwrap();
        let half = "s".repeat(BLOCK_BYTES / 2);
        let sig = json!({"type": "signature_delta", "signature": half});
        d.event(&delta(0, &sig)).unwrap();
        let th = json!({"type": "thinking_delta", "thinking": &half[2..]});
        assert_eq!(d.event(&delta(0, &th)), Ok(vec![]));
        let one = json!({"type": "thinking_delta", "thinking": "x"});
        assert_eq!(d.event(&delta(0, &one)), Err(DecodeError::Invalid));
    }

    #[test]
    fn a_step_holds_at_most_step_bytes() {
        let mut d = started();
        let edge = input_of(BLOCK_BYTES);
        for i in 0..2 {
            d.event(&tool(i)).unwrap();
            d.event(&json_delta(i, &edge)).unwrap();
            d.event(&stop(i)).unwrap();
        }
        assert_eq!(STEP_BYTES, 2 * BLOCK_BYTES);
        d.event(&tool(2)).unwrap();
        assert_eq!(d.event(&json_delta(2, "")), Ok(vec![]), "at the bound");
        assert_eq!(d.event(&json_delta(2, "{")), Err(DecodeError::Invalid));
        // A thinking start's own text counts too.
        let mut d = started();
        let big = "t".repeat(BLOCK_BYTES);
        for i in 0..2 {
            let b = json!({"type": "thinking", "thinking": big});
            d.event(&block_start(i, &b)).unwrap();
        }
        let b = json!({"type": "redacted_thinking", "data": "d"});
        assert_eq!(d.event(&block_start(2, &b)), Err(DecodeError::Invalid));
    }

    #[test]
    fn a_step_opens_at_most_blocks() {
        let mut d = started();
        for i in 0..BLOCKS as u64 {
            d.event(&block_start(i, &json!({"type": "text", "text": ""})))
                .unwrap();
        }
        let next = block_start(BLOCKS as u64, &json!({"type": "text", "text": ""}));
        assert_eq!(d.event(&next), Err(DecodeError::Invalid));
    }

    #[test]
    fn error_bodies() {
        let overflow = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"},"request_id":"req_1"}"#;
        assert!(error_body_is_overflow(overflow));
        let overloaded =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert!(!error_body_is_overflow(overloaded));
        assert!(!error_body_is_overflow(b"<html>502</html>"));
        assert!(!error_body_is_overflow(b""));
    }

    fn request<'a>(items: &'a [Item], tools: &'a [ToolSpec]) -> ModelRequest<'a> {
        ModelRequest {
            model: "claude-opus-4-6",
            provider: "anthropic",
            instructions: "",
            items,
            tools,
            effort: None,
            thinking: Thinking::Adaptive,
            max_output_tokens: 16_384,
        }
    }

    fn user(t: &str) -> Item {
        Item::User { text: t.into() }
    }

    fn assistant(t: &str) -> Item {
        Item::Assistant { text: t.into() }
    }

    fn call(id: &str, input: Value) -> Item {
        Item::ToolCall {
            call_id: id.into(),
            name: "read_file".into(),
            input,
        }
    }

    fn result(id: &str, is_error: bool) -> Item {
        Item::ToolResult {
            call_id: id.into(),
            output: format!("out {id}"),
            is_error,
        }
    }

    #[test]
    fn body_fields_system_and_tools() {
        assert_eq!(PATH, "/v1/messages");
        let tools = [ToolSpec {
            name: "read_file".into(),
            description: "Reads a file".into(),
            input_schema: json!({"type": "object"}),
        }];
        let items = [user("hi")];
        let mut req = request(&items, &tools);
        req.instructions = "You are magi.";
        assert_eq!(
            request_body(&req),
            json!({
                "model": "claude-opus-4-6",
                "max_tokens": 16_384,
                "stream": true,
                "system": [{"type": "text", "text": "You are magi.",
                            "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi",
                              "cache_control": {"type": "ephemeral"}}]}],
                "tools": [{"name": "read_file", "description": "Reads a file",
                           "input_schema": {"type": "object"}}],
            })
        );
        let body = request_body(&request(&items, &[]));
        assert!(body.get("system").is_none());
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn the_system_block_and_the_newest_messages_last_block_are_the_two_breakpoints() {
        let items = [
            user("q"),
            call("a", json!({})),
            result("a", false),
            user("next"),
        ];
        let mut req = request(&items, &[]);
        req.instructions = "sys";
        let body = request_body(&req);
        let text = body.to_string();
        assert_eq!(text.matches("cache_control").count(), 2, "{text}");
        assert_eq!(
            body["system"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        let msgs = body["messages"].as_array().unwrap();
        let last = msgs.last().unwrap()["content"].as_array().unwrap();
        assert_eq!(
            last.last().unwrap()["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(last.last().unwrap()["text"], "next");
    }

    #[test]
    fn tool_results_share_one_user_message_before_its_text() {
        let items = [
            user("look"),
            assistant("Reading both."),
            call("a", json!({"path": "x"})),
            call("b", Value::String("{bad".into())),
            result("a", false),
            result("b", true),
            user("and then?"),
        ];
        let body = request_body(&request(&items, &[]));
        let body = super::super::body::without_cache_control(&body);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "look"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "a", "name": "read_file", "input": {"path": "x"}},
                    {"type": "tool_use", "id": "b", "name": "read_file", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "out a", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "b", "content": "out b", "is_error": true},
                    {"type": "text", "text": "and then?"},
                ]},
            ])
        );
        // A result after text in the same user message still goes first.
        let items = [user("x"), result("a", false)];
        let body = request_body(&request(&items, &[]));
        assert_eq!(
            body["messages"][0]["content"][0]["type"],
            json!("tool_result")
        );
    }

    #[test]
    fn thinking_goes_back_only_to_its_provider() {
        let thinking = json!({"type": "thinking", "thinking": "hmm", "signature": "sig"});
        let items = [
            user("q"),
            Item::ProviderItem {
                provider: "anthropic".into(),
                item: thinking.clone(),
            },
            Item::ProviderItem {
                provider: "openai".into(),
                item: json!({"type": "reasoning", "encrypted_content": "e"}),
            },
            call("a", json!({})),
            result("a", false),
        ];
        let body = request_body(&request(&items, &[]));
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": [
                thinking,
                {"type": "tool_use", "id": "a", "name": "read_file", "input": {}},
            ]})
        );
        assert_eq!(body["messages"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn roles_alternate_and_empty_text_is_skipped() {
        let other = Item::ProviderItem {
            provider: "elsewhere".into(),
            item: json!({"type": "thinking"}),
        };
        let items = [
            user("a"),
            other,
            user("b"),
            assistant(""),
            assistant(" \n"),
            user(""),
            assistant("c"),
            assistant("d"),
        ];
        let body = request_body(&request(&items, &[]));
        let body = super::super::body::without_cache_control(&body);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "a"},
                                             {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "c"},
                                                  {"type": "text", "text": "d"}]},
            ])
        );
    }

    #[test]
    fn effort_adaptive_budget_and_default() {
        let items = [user("q")];
        let mut req = request(&items, &[]);
        for thinking in [Thinking::Adaptive, Thinking::Budget] {
            req.thinking = thinking;
            let body = request_body(&req);
            assert!(body.get("thinking").is_none(), "default sends nothing");
            assert!(body.get("output_config").is_none());
            assert_eq!(body["max_tokens"], json!(16_384));
        }
        req.thinking = Thinking::Adaptive;
        req.effort = Some("xhigh");
        let body = request_body(&req);
        assert_eq!(
            body["thinking"],
            json!({"type": "adaptive", "display": "summarized"})
        );
        assert_eq!(body["output_config"], json!({"effort": "xhigh"}));
        assert_eq!(body["max_tokens"], json!(16_384));
        req.thinking = Thinking::Budget;
        for (effort, budget) in [
            ("low", 4_096),
            ("medium", 10_240),
            ("high", 24_576),
            ("xhigh", 49_152),
            ("max", 65_536),
        ] {
            req.effort = Some(effort);
            let body = request_body(&req);
            assert_eq!(
                body["thinking"],
                json!({"type": "enabled", "budget_tokens": budget})
            );
            assert_eq!(body["max_tokens"], json!(budget + 16_384));
            assert!(body.get("output_config").is_none());
        }
        req.effort = Some("none");
        let body = request_body(&req);
        assert!(body.get("thinking").is_none());
        assert_eq!(body["max_tokens"], json!(16_384));
    }
}

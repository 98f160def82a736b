//! The OpenAI Responses API (the built-in `openai` provider, and configured providers with `wire_api: "responses"`): the request body built from a [`ModelRequest`](super::model::ModelRequest) and a
//! sans-IO decoder of its stream into [`ModelEvent`](super::model::ModelEvent)s.
//!
//! Items are final at `response.output_item.done` (`provider-streams.md` 3): the decoder takes
//! calls and reasoning from there and ignores their `.added` and argument deltas.

use super::model::{
    arguments_text, DecodeError, Item, ModelEvent, ModelRequest, SseEvent, StopReason,
    StreamDecoder, Usage,
};
use super::openai_chat::{count, error_kind, present, tool_input};
use super::sse::SseDecoder;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

/// The request path under the provider's base URL.
pub const PATH: &str = "/responses";
/// Most arguments bytes of one tool call.
pub const CALL_BYTES: usize = 8 << 20;
/// Most bytes one step may hand over: calls (IDs, names, arguments), reasoning items and
/// summaries.
pub const STEP_BYTES: usize = 16 << 20;
/// Most tool calls in one step.
pub const STEP_CALLS: usize = 128;

/// The streaming request body for one step (`runner.md` 1); `store: false`, so reasoning goes
/// back as the stored items with their `encrypted_content`.
#[must_use]
pub fn request_body(req: &ModelRequest<'_>) -> Value {
    let input: Vec<Value> = req
        .items
        .iter()
        .filter_map(|item| match item {
            Item::User { text } => Some(json!({
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}],
            })),
            Item::Assistant { text } => Some(json!({
                "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            })),
            Item::ToolCall {
                call_id,
                name,
                input,
            } => Some(json!({
                "type": "function_call", "call_id": call_id, "name": name,
                "arguments": arguments_text(input),
            })),
            Item::ToolResult {
                call_id, output, ..
            } => {
                Some(json!({"type": "function_call_output", "call_id": call_id, "output": output}))
            }
            Item::ProviderItem { provider, item } => {
                (provider == req.provider).then(|| item.clone())
            }
        })
        .collect();
    let mut body = json!({
        "model": req.model,
        "input": input,
        "stream": true,
        "store": false,
        "max_output_tokens": req.max_output_tokens,
    });
    if !req.instructions.is_empty() {
        body["instructions"] = json!(req.instructions);
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                    "parameters": t.input_schema})
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    if let Some(effort) = req.effort {
        body["reasoning"] = json!({"effort": effort, "summary": "auto"});
        body["include"] = json!(["reasoning.encrypted_content"]);
    }
    body
}

/// Whether a non-200 body (`{"error": {code, message, type}}`) says the prompt is too long.
#[must_use]
pub fn error_body_is_overflow(body: &[u8]) -> bool {
    super::openai_chat::error_body_is_overflow(body)
}

/// A required string member.
fn req_str<'a>(m: &'a Map<String, Value>, key: &str) -> Result<&'a str, DecodeError> {
    m.get(key)
        .and_then(Value::as_str)
        .ok_or(DecodeError::Invalid)
}

/// Decodes a Responses stream (`event:` + `data:` events ending with `response.completed`,
/// `response.incomplete` or `response.failed`).
#[derive(Debug, Default)]
pub struct Decoder {
    /// Function calls emitted this step.
    calls: usize,
    step_bytes: usize,
    /// IDs of the summaries emitted (`<item id>:<summary index>`), each emitted once.
    summaries: HashSet<String>,
    finished: bool,
}

impl Decoder {
    /// A decoder at the start of a step's stream.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn take(&mut self, bytes: usize) -> Result<(), DecodeError> {
        match self.step_bytes.checked_add(bytes) {
            Some(total) if total <= STEP_BYTES => {
                self.step_bytes = total;
                Ok(())
            }
            _ => Err(DecodeError::Invalid),
        }
    }

    fn summary(
        &mut self,
        id: String,
        text: &str,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), DecodeError> {
        if text.is_empty() || self.summaries.contains(&id) {
            return Ok(());
        }
        self.take(id.len() + text.len())?;
        self.summaries.insert(id.clone());
        out.push(ModelEvent::ReasoningSummary {
            id,
            text: text.to_owned(),
        });
        Ok(())
    }

    fn item_done(&mut self, item: &Value, out: &mut Vec<ModelEvent>) -> Result<(), DecodeError> {
        let obj = item.as_object().ok_or(DecodeError::Invalid)?;
        match obj.get("type").and_then(Value::as_str) {
            Some("function_call") => {
                // The done item is authoritative, also over a different `call_id` in `.added`.
                let call_id = req_str(obj, "call_id")?;
                let name = req_str(obj, "name")?;
                let args = match present(obj.get("arguments")) {
                    None => "",
                    Some(Value::String(s)) => s,
                    Some(_) => return Err(DecodeError::Invalid),
                };
                if name.is_empty() || self.calls >= STEP_CALLS || args.len() > CALL_BYTES {
                    return Err(DecodeError::Invalid);
                }
                self.take(call_id.len() + name.len() + args.len())?;
                self.calls += 1;
                out.push(ModelEvent::ToolCall {
                    call_id: call_id.to_owned(),
                    name: name.to_owned(),
                    input: tool_input(args),
                });
            }
            Some("reasoning") => {
                let id = match present(obj.get("id")) {
                    None => "",
                    Some(Value::String(s)) => s,
                    Some(_) => return Err(DecodeError::Invalid),
                };
                // With `store: false` a reasoning item without its `encrypted_content` names
                // nothing the server kept, and sending it back is rejected.
                if present(obj.get("encrypted_content")).is_some_and(Value::is_string) {
                    self.take(item.to_string().len())?;
                    out.push(ModelEvent::ProviderItem(item.clone()));
                }
                match present(obj.get("summary")) {
                    None => {}
                    Some(Value::Array(parts)) => {
                        for (n, part) in parts.iter().enumerate() {
                            let part = part.as_object().ok_or(DecodeError::Invalid)?;
                            if part.get("type").and_then(Value::as_str) == Some("summary_text") {
                                self.summary(format!("{id}:{n}"), req_str(part, "text")?, out)?;
                            }
                        }
                    }
                    Some(_) => return Err(DecodeError::Invalid),
                }
            }
            // Message text came as `output_text` deltas; other item types carry nothing here.
            _ => {}
        }
        Ok(())
    }

    fn usage(response: Option<&Map<String, Value>>) -> Result<Option<Usage>, DecodeError> {
        let Some(usage) = response.and_then(|r| present(r.get("usage"))) else {
            return Ok(None);
        };
        let usage = usage.as_object().ok_or(DecodeError::Invalid)?;
        let cached = match present(usage.get("input_tokens_details")) {
            None => None,
            Some(Value::Object(d)) => count(d, "cached_tokens")?,
            Some(_) => return Err(DecodeError::Invalid),
        };
        Ok(Some(Usage {
            input_tokens: count(usage, "input_tokens")?.unwrap_or(0),
            output_tokens: count(usage, "output_tokens")?.unwrap_or(0),
            cached_input_tokens: cached,
        }))
    }

    /// The terminal `response.completed` / `response.incomplete`: usage, then the stop.
    fn end(
        &mut self,
        ev: &Map<String, Value>,
        reason: StopReason,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), DecodeError> {
        let response = match present(ev.get("response")) {
            None => None,
            Some(Value::Object(r)) => Some(r),
            Some(_) => return Err(DecodeError::Invalid),
        };
        if let Some(usage) = Self::usage(response)? {
            out.push(ModelEvent::Usage(usage));
        }
        out.push(ModelEvent::Stop(reason));
        self.finished = true;
        Ok(())
    }
}

impl StreamDecoder for Decoder {
    fn event(&mut self, ev: &SseEvent) -> Result<Vec<ModelEvent>, DecodeError> {
        let mut out = Vec::new();
        let data = ev.data.trim();
        // Some compatible servers end with Chat's `[DONE]` as well; it says nothing here.
        if self.finished || data.is_empty() || data == "[DONE]" {
            return Ok(out);
        }
        let v: Value = serde_json::from_str(data).map_err(|_| DecodeError::Invalid)?;
        let obj = v.as_object().ok_or(DecodeError::Invalid)?;
        let kind = match present(obj.get("type")) {
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(DecodeError::Invalid),
            None => ev.event.as_deref().unwrap_or_default(),
        };
        match kind {
            "response.output_text.delta" => {
                let delta = req_str(obj, "delta")?;
                if !delta.is_empty() {
                    out.push(ModelEvent::TextDelta(delta.to_owned()));
                }
            }
            "response.output_item.done" => {
                self.item_done(obj.get("item").ok_or(DecodeError::Invalid)?, &mut out)?;
            }
            "response.reasoning_summary_text.done" => {
                let id = format!("{}:{}", req_str(obj, "item_id")?, {
                    count(obj, "summary_index")?.ok_or(DecodeError::Invalid)?
                });
                self.summary(id, req_str(obj, "text")?, &mut out)?;
            }
            "response.completed" => {
                let reason = if self.calls > 0 {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                };
                self.end(obj, reason, &mut out)?;
            }
            "response.incomplete" => {
                let why = obj
                    .get("response")
                    .and_then(|r| r.get("incomplete_details"))
                    .and_then(|d| d.get("reason"))
                    .and_then(Value::as_str);
                let reason = if why == Some("content_filter") {
                    StopReason::Other
                } else {
                    StopReason::MaxTokens
                };
                self.end(obj, reason, &mut out)?;
            }
            "response.failed" => {
                let err = obj.get("response").and_then(|r| present(r.get("error")));
                return Err(err.map_or(DecodeError::Remote, error_kind));
            }
            // The `error` event carries `code` and `message` at its top level.
            "error" => {
                return Err(match present(obj.get("error")) {
                    Some(err) => error_kind(err),
                    None => error_kind(&v),
                });
            }
            _ => {}
        }
        Ok(out)
    }

    fn finished(&self) -> bool {
        self.finished
    }
}

/// Fuzz entry: arbitrary bytes through the SSE decoder and this API's stream decoder; never
/// panics.
pub fn fuzz(data: &[u8]) {
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let _ = error_body_is_overflow(data);
    let mut sse = SseDecoder::new();
    let mut dec = Decoder::new();
    for piece in [&data[..split], &data[split..]] {
        let Ok(events) = sse.feed(piece) else { return };
        for ev in &events {
            let done = dec.finished();
            match dec.event(ev) {
                Ok(out) => assert!(!done || out.is_empty(), "an event after the end"),
                Err(_) => return,
            }
        }
    }
}

//! The OpenAI Responses API (the built-in `openai` provider, and configured providers with `wire_api: "responses"`): the request body built from a [`ModelRequest`] and a
//! sans-IO decoder of its stream into [`ModelEvent`]s.
//!
//! Items are final at `response.output_item.done` (`provider-streams.md` 3): the decoder takes
//! calls and reasoning from there and ignores their `.added` and argument deltas.

use super::model::{
    arguments_text, DecodeError, Item, ModelEvent, ModelRequest, SseEvent, StopReason,
    StreamDecoder, Usage,
};
use super::openai_chat::{count, error_kind, present, tool_input};
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
            cache_creation_input_tokens: None,
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
            // A refusal is the reply the user sees, like text.
            "response.output_text.delta" | "response.refusal.delta" => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::fuzzing::events::{call, data, usage};
    use crate::providers::fuzzing::openai_responses as fuzz;
    use crate::providers::model::{Thinking, ToolSpec};
    use ModelEvent::{ProviderItem, ReasoningSummary, Stop, TextDelta};

    use crate::providers::sse::SseDecoder;

    fn make() -> Box<dyn StreamDecoder> {
        Box::new(Decoder::new())
    }

    /// Decodes a fixture, checking every two-piece split of its bytes decodes the same.
    fn fixture(bytes: &[u8]) -> (Vec<ModelEvent>, Option<DecodeError>, bool) {
        super::super::fuzzing::decode_fixture(bytes, &make)
    }

    fn done(item: Value) -> SseEvent {
        data(&json!({"type": "response.output_item.done", "item": item}))
    }

    fn fc(call_id: &str, args: &str) -> SseEvent {
        done(json!({"type": "function_call", "call_id": call_id, "name": "f", "arguments": args}))
    }

    #[test]
    fn quoted_function_call_takes_the_done_call_id() {
        let (evs, err, fin) = fixture(include_bytes!(
            "fixtures/openai_responses/function_call.sse"
        ));
        let want = [
            call(
                "call_2345abc",
                "get_weather",
                json!({"location": "Paris, France"}),
            ),
            usage(40, 10, None),
            Stop(StopReason::ToolUse),
        ];
        assert_eq!((evs, err, fin), (want.to_vec(), None, true));
    }

    #[test]
    fn full_turn_with_reasoning_and_call() {
        let (evs, err, fin) = fixture(include_bytes!("fixtures/openai_responses/full_turn.sse"));
        let want = [
            ProviderItem(json!({"type": "reasoning", "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "**Planning** I will read the file."}],
                "encrypted_content": "gAAAA…"})),
            ReasoningSummary {
                id: "rs_1:0".into(),
                text: "**Planning** I will read the file.".into(),
            },
            call("call_1", "read_file", json!({"path": "a.rs"})),
            usage(100, 30, Some(0)),
            Stop(StopReason::ToolUse),
        ];
        assert_eq!((evs, err, fin), (want.to_vec(), None, true));
    }

    #[test]
    fn text_turn() {
        let (evs, err, fin) = fixture(include_bytes!("fixtures/openai_responses/text.sse"));
        let want = [
            TextDelta("Hello".into()),
            TextDelta(", world".into()),
            usage(20, 4, Some(16)),
            Stop(StopReason::EndTurn),
        ];
        assert_eq!((evs, err, fin), (want.to_vec(), None, true));
        // Events after the terminal one are ignored.
        let mut d = Decoder::new();
        for ev in SseDecoder::new()
            .feed(include_bytes!("fixtures/openai_responses/text.sse"))
            .unwrap()
        {
            d.event(&ev).unwrap();
        }
        let late = json!({"type": "response.output_text.delta", "delta": "late"});
        assert!(d.event(&data(&late)).unwrap().is_empty());
    }

    #[test]
    fn failed_with_context_length_exceeded() {
        let (evs, err, fin) = fixture(include_bytes!(
            "fixtures/openai_responses/failed_overflow.sse"
        ));
        assert_eq!(
            (evs, err, fin),
            (vec![], Some(DecodeError::ContextOverflow), false)
        );
        let failed = |e: Value| {
            Decoder::new().event(&data(
                &json!({"type": "response.failed", "response": {"error": e}}),
            ))
        };
        assert_eq!(
            failed(json!({"code": "server_error", "message": "oops"})),
            Err(DecodeError::Remote)
        );
        assert_eq!(failed(Value::Null), Err(DecodeError::Remote));
        // The `error` event: code and message at its top level.
        let error = |v: Value| Decoder::new().event(&data(&v));
        assert_eq!(
            error(json!({"type": "error", "code": "context_length_exceeded", "message": "x"})),
            Err(DecodeError::ContextOverflow)
        );
        assert_eq!(
            error(json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow"})),
            Err(DecodeError::Remote)
        );
    }

    #[test]
    fn incomplete_is_max_tokens() {
        let (evs, err, fin) = fixture(include_bytes!("fixtures/openai_responses/incomplete.sse"));
        let want = [
            TextDelta("The list goes on".into()),
            usage(10, 16, None),
            Stop(StopReason::MaxTokens),
        ];
        assert_eq!((evs, err, fin), (want.to_vec(), None, true));
        let filtered = json!({"type": "response.incomplete",
            "response": {"incomplete_details": {"reason": "content_filter"}}});
        assert_eq!(
            Decoder::new().event(&data(&filtered)).unwrap(),
            [Stop(StopReason::Other)]
        );
    }

    #[test]
    fn summaries_are_emitted_once_and_plain_reasoning_is_not_stored() {
        let mut d = Decoder::new();
        let text_done = json!({"type": "response.reasoning_summary_text.done",
            "item_id": "rs_2", "summary_index": 1, "text": "second"});
        let first = ReasoningSummary {
            id: "rs_2:1".into(),
            text: "second".into(),
        };
        assert_eq!(d.event(&data(&text_done)).unwrap(), [first]);
        // The item repeats summary 1 and adds summary 0; without encrypted_content it is not
        // a provider item.
        let item = json!({"type": "reasoning", "id": "rs_2", "summary": [
            {"type": "summary_text", "text": "first"},
            {"type": "summary_text", "text": "second"}]});
        assert_eq!(
            d.event(&done(item)).unwrap(),
            [ReasoningSummary {
                id: "rs_2:0".into(),
                text: "first".into()
            }]
        );
        assert!(d.event(&data(&text_done)).unwrap().is_empty());
    }

    #[test]
    fn unknown_and_malformed_events() {
        let mut d = Decoder::new();
        for ok in [
            json!({"type": "response.created", "response": {}}),
            json!({"type": "response.reasoning_summary_text.delta", "delta": "x"}),
            json!({"type": "response.function_call_arguments.delta", "delta": "{"}),
            json!({"type": "response.something_new"}),
            json!({"type": "response.output_item.done", "item": {"type": "message", "content": []}}),
        ] {
            assert!(d.event(&data(&ok)).unwrap().is_empty(), "{ok}");
        }
        let done_marker = SseEvent {
            event: None,
            data: "[DONE]".into(),
        };
        assert!(d.event(&done_marker).unwrap().is_empty());
        assert!(!d.finished());
        for bad in [
            "{oops",
            "\"str\"",
            r#"{"type": 3}"#,
            r#"{"type": "response.output_text.delta"}"#,
            r#"{"type": "response.output_item.done"}"#,
            r#"{"type": "response.output_item.done", "item": {"type": "function_call", "name": "f"}}"#,
            r#"{"type": "response.output_item.done", "item": {"type": "reasoning", "summary": {}}}"#,
            r#"{"type": "response.completed", "response": {"usage": {"input_tokens": -1}}}"#,
        ] {
            let ev = SseEvent {
                event: None,
                data: bad.into(),
            };
            assert_eq!(
                Decoder::new().event(&ev),
                Err(DecodeError::Invalid),
                "{bad}"
            );
        }
        let refusal = json!({"type": "response.refusal.delta", "delta": "I can't help."});
        assert_eq!(
            Decoder::new().event(&data(&refusal)).unwrap(),
            [TextDelta("I can't help.".into())]
        );
        // Without a `type` member the SSE event name says what it is.
        let named = SseEvent {
            event: Some("response.output_text.delta".into()),
            data: r#"{"delta":"hi"}"#.into(),
        };
        assert_eq!(
            Decoder::new().event(&named).unwrap(),
            [TextDelta("hi".into())]
        );
    }

    #[test]
    fn call_count_is_bounded() {
        let mut d = Decoder::new();
        for n in 0..STEP_CALLS {
            assert_eq!(d.event(&fc(&format!("c{n}"), "")).unwrap().len(), 1);
        }
        assert_eq!(d.event(&fc("over", "")), Err(DecodeError::Invalid));
    }

    #[test]
    fn call_and_step_bytes_are_bounded() {
        let big = "x".repeat(CALL_BYTES);
        let mut d = Decoder::new();
        let got = d.event(&fc("a", &big)).unwrap();
        assert_eq!(got, [call("a", "f", Value::String(big.clone()))]);
        assert_eq!(
            Decoder::new().event(&fc("a", &format!("{big}y"))),
            Err(DecodeError::Invalid)
        );
        // Two calls "a"/"f" and "b"/"f": 2 + CALL_BYTES, then 2 + the rest of the step.
        let rest = STEP_BYTES - 2 - CALL_BYTES - 2;
        d.event(&fc("b", &"x".repeat(rest))).unwrap();
        assert_eq!(d.event(&fc("c", "")), Err(DecodeError::Invalid));
        let mut d = Decoder::new();
        d.event(&fc("a", &big)).unwrap();
        d.event(&fc("b", &"x".repeat(rest - 1))).unwrap();
        // One byte left: a summary needs more (its ID alone is "r:0").
        let s = json!({"type": "response.reasoning_summary_text.done",
            "item_id": "r", "summary_index": 0, "text": "t"});
        assert_eq!(d.event(&data(&s)), Err(DecodeError::Invalid));
    }

    fn request<'a>(items: &'a [Item], tools: &'a [ToolSpec], effort: Option<&'a str>) -> Value {
        request_body(&ModelRequest {
            model: "gpt-5",
            provider: "openai",
            instructions: "Be brief.",
            items,
            tools,
            effort,
            thinking: Thinking::Adaptive,
            max_output_tokens: 16_384,
        })
    }

    #[test]
    fn request_input_order_and_provider_items() {
        let ours = json!({"type": "reasoning", "id": "rs_1", "summary": [],
            "encrypted_content": "gAAAA"});
        let items = [
            Item::User {
                text: "read a".into(),
            },
            Item::ProviderItem {
                provider: "anthropic".into(),
                item: json!({"type": "thinking", "thinking": "t", "signature": "s"}),
            },
            Item::ProviderItem {
                provider: "openai".into(),
                item: ours.clone(),
            },
            Item::Assistant {
                text: "Reading.".into(),
            },
            Item::ToolCall {
                call_id: "call_1".into(),
                name: "read_file".into(),
                input: json!({"path": "a.rs"}),
            },
            Item::ToolResult {
                call_id: "call_1".into(),
                output: "denied by the user".into(),
                is_error: true,
            },
        ];
        let tools = [ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            input_schema: json!({"type": "object"}),
        }];
        let want = json!({
            "model": "gpt-5",
            "instructions": "Be brief.",
            "input": [
                {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "read a"}]},
                ours,
                {"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Reading."}]},
                {"type": "function_call", "call_id": "call_1", "name": "read_file",
                    "arguments": "{\"path\":\"a.rs\"}"},
                {"type": "function_call_output", "call_id": "call_1",
                    "output": "denied by the user"},
            ],
            "tools": [{"type": "function", "name": "read_file", "description": "Reads a file.",
                "parameters": {"type": "object"}}],
            "stream": true,
            "store": false,
            "max_output_tokens": 16_384,
        });
        assert_eq!(request(&items, &tools, None), want);
    }

    #[test]
    fn request_effort_on_and_off() {
        let items = [Item::User { text: "hi".into() }];
        let on = request(&items, &[], Some("xhigh"));
        assert_eq!(
            on["reasoning"],
            json!({"effort": "xhigh", "summary": "auto"})
        );
        assert_eq!(on["include"], json!(["reasoning.encrypted_content"]));
        let off = request(&items, &[], None);
        assert!(off.get("reasoning").is_none() && off.get("include").is_none());
        assert!(off.get("tools").is_none());
        let bare = request_body(&ModelRequest {
            model: "gpt-5",
            provider: "openai",
            instructions: "",
            items: &items,
            tools: &[],
            effort: None,
            thinking: Thinking::Adaptive,
            max_output_tokens: 1,
        });
        assert!(bare.get("instructions").is_none());
    }

    #[test]
    fn error_bodies() {
        assert!(error_body_is_overflow(
            br#"{"error":{"message":"Your input exceeds the context window of this model.","type":"invalid_request_error","code":"context_length_exceeded"}}"#
        ));
        assert!(!error_body_is_overflow(
            br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#
        ));
        assert!(!error_body_is_overflow(b""));
    }

    #[test]
    fn fuzz_corpus_replays() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fuzz/corpus/openai_responses"
        );
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            fuzz(&std::fs::read(entry.unwrap().path()).unwrap());
            n += 1;
        }
        assert!(n > 1, "seeds in {dir}");
    }

    #[test]
    fn fuzz_entry_takes_fixtures_and_garbage() {
        fuzz(include_bytes!("fixtures/openai_responses/full_turn.sse"));
        fuzz(b"\x00data: {\"type\":\"response.completed\"}\n\ndata: {\"type\":\"error\"}\n\n");
        fuzz(b"");
    }
}

//! OpenAI Chat Completions (configured `openai-compatible` providers): the request body built from a [`ModelRequest`] and a
//! sans-IO decoder of its stream into [`ModelEvent`]s.
//!
//! Tool calls arrive as `delta.tool_calls[]` fragments keyed by `index`; servers differ in how
//! they split them (`provider-streams.md` 2 and 4), so the decoder accumulates until
//! `finish_reason` or `[DONE]` and only then emits whole calls.

use super::model::{
    arguments_text, is_overflow, parse_arguments, DecodeError, Item, ModelEvent, ModelRequest,
    SseEvent, StopReason, StreamDecoder, Usage,
};
use serde_json::{json, Map, Value};

/// The request path under the provider's base URL.
pub const PATH: &str = "/chat/completions";
/// Most arguments bytes one tool call may accumulate.
pub const CALL_BYTES: usize = 8 << 20;
/// Most bytes one step may accumulate over all its calls (IDs, names and arguments).
pub const STEP_BYTES: usize = 16 << 20;
/// Most tool calls in one step.
pub const STEP_CALLS: usize = 128;

/// The streaming request body for one step (`runner.md` 1).
#[must_use]
pub fn request_body(req: &ModelRequest<'_>) -> Value {
    let mut messages = Vec::new();
    if !req.instructions.is_empty() {
        messages.push(json!({"role": "system", "content": req.instructions}));
    }
    let mut reply = Reply::default();
    for item in req.items {
        match item {
            Item::User { text } => {
                reply.flush(&mut messages);
                messages.push(json!({"role": "user", "content": text}));
            }
            Item::Assistant { text } => reply.text(text),
            Item::ToolCall {
                call_id,
                name,
                input,
            } => {
                reply.open = true;
                reply.calls.push(json!({
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments_text(input)},
                }));
            }
            Item::ToolResult {
                call_id, output, ..
            } => {
                // Chat has no error flag: the output text already says the call failed.
                reply.flush(&mut messages);
                messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
            }
            // Chat has nowhere to carry opaque provider data, and it must not split a reply.
            Item::ProviderItem { .. } => {}
        }
    }
    reply.flush(&mut messages);
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": req.max_output_tokens,
    });
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema,
                }})
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    if let Some(effort) = req.effort {
        body["reasoning_effort"] = json!(effort);
    }
    body
}

/// Consecutive assistant text and tool calls, sent as one assistant message.
#[derive(Default)]
struct Reply {
    open: bool,
    text: String,
    calls: Vec<Value>,
}

impl Reply {
    fn text(&mut self, text: &str) {
        if !self.text.is_empty() && !text.is_empty() {
            self.text.push_str("\n\n");
        }
        self.text.push_str(text);
        self.open = true;
    }

    fn flush(&mut self, messages: &mut Vec<Value>) {
        if !std::mem::take(&mut self.open) {
            return;
        }
        let text = std::mem::take(&mut self.text);
        let calls = std::mem::take(&mut self.calls);
        if calls.is_empty() {
            messages.push(json!({"role": "assistant", "content": text}));
        } else {
            // An empty string rather than null: OpenAI takes both, but llama-cpp-python's
            // server (tried end to end) rejects a null content with a 500.
            messages.push(json!({"role": "assistant", "content": text, "tool_calls": calls}));
        }
    }
}

/// Whether a non-200 body (`{"error": {code, message, type}}`) says the prompt is too long.
#[must_use]
pub fn error_body_is_overflow(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").map(error_kind))
        == Some(DecodeError::ContextOverflow)
}

/// What an OpenAI `error` object reports: a context overflow by its code, type or message, or
/// another remote error. Also used by the Responses decoder.
#[must_use]
pub fn error_kind(err: &Value) -> DecodeError {
    let field = |k: &str| err.get(k).and_then(Value::as_str);
    let overflow = match err.as_str() {
        Some(message) => is_overflow(None, Some(message)),
        None => is_overflow(field("code"), field("message")) || is_overflow(field("type"), None),
    };
    if overflow {
        DecodeError::ContextOverflow
    } else {
        DecodeError::Remote
    }
}

/// The value of a member unless it is absent or `null` (servers send `null` for "not set").
pub(crate) fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// A string member, absent or `null` as `None`; another type is malformed.
fn opt_str<'a>(m: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, DecodeError> {
    match present(m.get(key)) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(DecodeError::Invalid),
    }
}

/// A token count member, absent or `null` as `None`.
pub(crate) fn count(m: &Map<String, Value>, key: &str) -> Result<Option<u64>, DecodeError> {
    present(m.get(key))
        .map(|v| v.as_u64().ok_or(DecodeError::Invalid))
        .transpose()
}

/// Tool input from accumulated arguments text; no text at all means no arguments.
pub(crate) fn tool_input(args: &str) -> Value {
    if args.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        parse_arguments(args)
    }
}

/// A tool call being accumulated from fragments.
#[derive(Debug)]
struct Call {
    index: Option<u64>,
    id: Option<String>,
    name: String,
    args: String,
}

/// Decodes a Chat Completions stream (`data:` chunks ending with `data: [DONE]`).
#[derive(Debug, Default)]
pub struct Decoder {
    calls: Vec<Call>,
    step_bytes: usize,
    /// A `finish_reason` came: the reply is over, only usage and `[DONE]` remain.
    stopped: bool,
    finished: bool,
    /// Text or a call fragment came.
    content: bool,
}

impl Decoder {
    /// A decoder at the start of a step's stream.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn choice(&mut self, choice: &Value, out: &mut Vec<ModelEvent>) -> Result<(), DecodeError> {
        let choice = choice.as_object().ok_or(DecodeError::Invalid)?;
        if let Some(delta) = present(choice.get("delta")) {
            let delta = delta.as_object().ok_or(DecodeError::Invalid)?;
            // `reasoning_content` (DeepSeek, llama.cpp) is raw reasoning: never shown or stored.
            for key in ["content", "refusal"] {
                if let Some(text) = opt_str(delta, key)? {
                    if !text.is_empty() {
                        self.content = true;
                        out.push(ModelEvent::TextDelta(text.to_owned()));
                    }
                }
            }
            match present(delta.get("tool_calls")) {
                None => {}
                Some(Value::Array(fragments)) => {
                    for f in fragments {
                        self.content = true;
                        self.fragment(f)?;
                    }
                }
                Some(_) => return Err(DecodeError::Invalid),
            }
        }
        if let Some(reason) = opt_str(choice, "finish_reason")? {
            let reason = match reason {
                // Ollama ends a streamed tool call with "stop".
                "stop" if !self.calls.is_empty() => StopReason::ToolUse,
                "stop" => StopReason::EndTurn,
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "length" => StopReason::MaxTokens,
                _ => StopReason::Other,
            };
            self.stop(reason, out)?;
        }
        Ok(())
    }

    fn fragment(&mut self, f: &Value) -> Result<(), DecodeError> {
        let f = f.as_object().ok_or(DecodeError::Invalid)?;
        let index = count(f, "index")?;
        let id = opt_str(f, "id")?.filter(|s| !s.is_empty());
        let (name, args) = match present(f.get("function")) {
            None => (None, None),
            Some(Value::Object(func)) => {
                let name = opt_str(func, "name")?.filter(|s| !s.is_empty());
                let args = match present(func.get("arguments")) {
                    None => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    // Ollama's native shape: the arguments as an object, not as text.
                    Some(v @ Value::Object(_)) => Some(v.to_string()),
                    Some(_) => return Err(DecodeError::Invalid),
                };
                (name, args)
            }
            Some(_) => return Err(DecodeError::Invalid),
        };
        let pos = match self.continues(index, id, name) {
            Some(pos) => pos,
            None => {
                if self.calls.len() >= STEP_CALLS {
                    return Err(DecodeError::Invalid);
                }
                self.calls.push(Call {
                    index,
                    id: None,
                    name: String::new(),
                    args: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[pos];
        // IDs and names are set once and never concatenated: llama-cpp-python repeats both
        // in every fragment.
        let new_id = id.filter(|_| call.id.is_none());
        let new_name = name.filter(|_| call.name.is_empty());
        let args = args.unwrap_or_default();
        if call.args.len() + args.len() > CALL_BYTES {
            return Err(DecodeError::Invalid);
        }
        let add = new_id.map_or(0, str::len) + new_name.map_or(0, str::len) + args.len();
        if self.step_bytes + add > STEP_BYTES {
            return Err(DecodeError::Invalid);
        }
        self.step_bytes += add;
        if let Some(id) = new_id {
            call.id = Some(id.to_owned());
        }
        if let Some(name) = new_name {
            call.name = name.to_owned();
        }
        call.args.push_str(&args);
        Ok(())
    }

    /// The accumulated call a fragment continues, or `None` when it starts a new one.
    fn continues(&self, index: Option<u64>, id: Option<&str>, name: Option<&str>) -> Option<usize> {
        let pos = match (index, id) {
            // Without an index (old Ollama), an ID names its call, and a name starts one.
            (None, Some(id)) => {
                return self.calls.iter().rposition(|c| c.id.as_deref() == Some(id))
            }
            (None, None) if name.is_some() => return None,
            (None, None) => self.calls.len().checked_sub(1)?,
            (Some(i), _) => self.calls.iter().rposition(|c| c.index == Some(i))?,
        };
        let call = &self.calls[pos];
        // Ollama repeats index 0 for parallel calls: a different ID (or, without IDs, a
        // different name) is a new call at the same index.
        let other_id = matches!((id, call.id.as_deref()), (Some(a), Some(b)) if a != b);
        let other_name =
            id.is_none() && matches!(name, Some(n) if !call.name.is_empty() && n != call.name);
        (!other_id && !other_name).then_some(pos)
    }

    /// Emits the collected calls in arrival order, then the stop.
    fn stop(&mut self, reason: StopReason, out: &mut Vec<ModelEvent>) -> Result<(), DecodeError> {
        self.stopped = true;
        for (n, call) in self.calls.drain(..).enumerate() {
            if call.name.is_empty() {
                return Err(DecodeError::Invalid);
            }
            out.push(ModelEvent::ToolCall {
                call_id: call.id.unwrap_or_else(|| format!("call_{n}")),
                name: call.name,
                input: tool_input(&call.args),
            });
        }
        out.push(ModelEvent::Stop(reason));
        Ok(())
    }
}

impl StreamDecoder for Decoder {
    fn event(&mut self, ev: &SseEvent) -> Result<Vec<ModelEvent>, DecodeError> {
        let mut out = Vec::new();
        let data = ev.data.trim();
        if self.finished || data.is_empty() {
            return Ok(out);
        }
        if data == "[DONE]" {
            self.finished = true;
            // Without any `finish_reason` the server cut the stream short (`runner.md` 1):
            // nothing said is an empty answer, anything said a broken stream.
            if !self.stopped {
                return Err(if self.content {
                    DecodeError::Invalid
                } else {
                    DecodeError::Empty
                });
            }
            return Ok(out);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|_| DecodeError::Invalid)?;
        let chunk = chunk.as_object().ok_or(DecodeError::Invalid)?;
        if let Some(err) = present(chunk.get("error")) {
            return Err(error_kind(err));
        }
        if ev.event.as_deref() == Some("error") {
            return Err(error_kind(&Value::Object(chunk.clone())));
        }
        match present(chunk.get("choices")) {
            None => {}
            Some(Value::Array(choices)) => {
                // The usage chunk has `choices: []`; after the stop, choices carry nothing.
                if let (Some(choice), false) = (choices.first(), self.stopped) {
                    self.choice(choice, &mut out)?;
                }
            }
            Some(_) => return Err(DecodeError::Invalid),
        }
        if let Some(usage) = present(chunk.get("usage")) {
            let usage = usage.as_object().ok_or(DecodeError::Invalid)?;
            let cached = match present(usage.get("prompt_tokens_details")) {
                None => None,
                Some(Value::Object(d)) => count(d, "cached_tokens")?,
                Some(_) => return Err(DecodeError::Invalid),
            };
            out.push(ModelEvent::Usage(Usage {
                input_tokens: count(usage, "prompt_tokens")?.unwrap_or(0),
                output_tokens: count(usage, "completion_tokens")?.unwrap_or(0),
                cached_input_tokens: cached,
                cache_creation_input_tokens: None,
            }));
        }
        Ok(out)
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn said_nothing(&self) -> bool {
        !self.content && !self.stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::fuzzing::events::{call, data, usage};
    use crate::providers::fuzzing::openai_chat as fuzz;
    use crate::providers::model::{Thinking, ToolSpec};
    use ModelEvent::{Stop, TextDelta};

    fn make() -> Box<dyn StreamDecoder> {
        Box::new(Decoder::new())
    }

    /// Decodes a fixture, checking every two-piece split of its bytes decodes the same.
    fn fixture(bytes: &[u8]) -> (Vec<ModelEvent>, Option<DecodeError>, bool) {
        super::super::fuzzing::decode_fixture(bytes, &make)
    }

    fn frag(f: Value) -> SseEvent {
        data(&json!({"choices": [{"index": 0, "delta": {"tool_calls": [f]}}]}))
    }

    #[test]
    fn quoted_split_arguments() {
        let (evs, err, done) = fixture(include_bytes!("fixtures/openai_chat/split_args.sse"));
        let want = [
            call(
                "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                "get_weather",
                json!({"location": "Paris, France"}),
            ),
            Stop(StopReason::ToolUse),
        ];
        assert_eq!((evs, err, done), (want.to_vec(), None, true));
    }

    #[test]
    fn parallel_calls_then_usage_chunk() {
        let (evs, err, done) = fixture(include_bytes!("fixtures/openai_chat/parallel_usage.sse"));
        let want = [
            call("call_A", "read_file", json!({"path": "a.rs"})),
            call("call_B", "read_file", json!({"path": "b.rs"})),
            Stop(StopReason::ToolUse),
            usage(50, 20, None),
        ];
        assert_eq!((evs, err, done), (want.to_vec(), None, true));
    }

    #[test]
    fn whole_call_in_one_chunk() {
        let (evs, err, done) = fixture(include_bytes!("fixtures/openai_chat/whole_call.sse"));
        let want = [
            call("call_w", "read_file", json!({"path": "a.rs"})),
            Stop(StopReason::ToolUse),
            usage(12, 5, None),
        ];
        assert_eq!((evs, err, done), (want.to_vec(), None, true));
    }

    #[test]
    fn repeated_index_zero_with_distinct_ids() {
        let (evs, err, done) = fixture(include_bytes!("fixtures/openai_chat/repeated_index.sse"));
        let want = [
            call("abc123", "read_file", json!({"path": "a.rs"})),
            call("def456", "list_dir", json!({"path": "."})),
            Stop(StopReason::ToolUse),
        ];
        assert_eq!((evs, err, done), (want.to_vec(), None, true));
    }

    #[test]
    fn repeated_id_and_name_are_not_concatenated() {
        let (evs, err, done) = fixture(include_bytes!("fixtures/openai_chat/repeated_id_name.sse"));
        let want = [
            call("call_lcp", "read_file", json!({"path": "a.rs"})),
            Stop(StopReason::ToolUse),
        ];
        assert_eq!((evs, err, done), (want.to_vec(), None, true));
    }

    #[test]
    fn missing_ids_are_generated() {
        let (evs, err, done) = fixture(include_bytes!("fixtures/openai_chat/missing_id.sse"));
        let want = [
            call("call_0", "read_file", json!({"path": "a.rs"})),
            call("call_1", "list_dir", json!({})),
            Stop(StopReason::ToolUse),
        ];
        assert_eq!((evs, err, done), (want.to_vec(), None, true));
    }

    #[test]
    fn stop_with_calls_is_tool_use_and_reasoning_content_is_silent() {
        let (evs, err, done) = fixture(include_bytes!("fixtures/openai_chat/stop_with_calls.sse"));
        let want = [
            TextDelta("Reading.".into()),
            call("call_s", "read_file", json!({"path": "a.rs"})),
            Stop(StopReason::ToolUse),
        ];
        assert_eq!((evs, err, done), (want.to_vec(), None, true));
    }

    #[test]
    fn text_turn_with_cached_usage() {
        let (evs, err, done) = fixture(include_bytes!("fixtures/openai_chat/text.sse"));
        let want = [
            TextDelta("Hello".into()),
            TextDelta(", world".into()),
            Stop(StopReason::EndTurn),
            usage(9, 3, Some(4)),
        ];
        assert_eq!((evs, err, done), (want.to_vec(), None, true));
    }

    #[test]
    fn mid_stream_error_is_remote_or_overflow() {
        let (evs, err, done) = fixture(include_bytes!("fixtures/openai_chat/mid_stream_error.sse"));
        let want = [TextDelta("Hel".into()), TextDelta("lo".into())];
        assert_eq!(
            (evs, err, done),
            (want.to_vec(), Some(DecodeError::Remote), false)
        );
        let overflow = json!({"error": {"message": "This model's maximum context length is 8192 tokens", "code": null}});
        assert_eq!(
            Decoder::new().event(&data(&overflow)),
            Err(DecodeError::ContextOverflow)
        );
        let by_code = json!({"error": {"message": "too big", "code": "context_length_exceeded"}});
        assert_eq!(
            Decoder::new().event(&data(&by_code)),
            Err(DecodeError::ContextOverflow)
        );
        // An `event: error` whose data is the error object itself.
        let named = SseEvent {
            event: Some("error".into()),
            data: r#"{"message":"overloaded"}"#.into(),
        };
        assert_eq!(Decoder::new().event(&named), Err(DecodeError::Remote));
    }

    #[test]
    fn finish_reasons_and_done_without_one() {
        let finish = |r: &str| {
            let mut d = Decoder::new();
            d.event(&data(
                &json!({"choices": [{"delta": {}, "finish_reason": r}]}),
            ))
            .unwrap()
        };
        assert_eq!(finish("length"), [Stop(StopReason::MaxTokens)]);
        assert_eq!(finish("content_filter"), [Stop(StopReason::Other)]);
        assert_eq!(finish("stop"), [Stop(StopReason::EndTurn)]);
        // `[DONE]` without any finish_reason: the stream was cut short (`runner.md` 1), a
        // broken stream once anything was said, an empty answer when nothing was.
        let mut d = Decoder::new();
        assert!(d
            .event(&frag(
                json!({"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}})
            ))
            .unwrap()
            .is_empty());
        let done = SseEvent {
            event: None,
            data: "[DONE]".into(),
        };
        assert_eq!(d.event(&done), Err(DecodeError::Invalid));
        assert!(d.finished());
        assert!(d
            .event(&data(&json!({"choices": [{"delta": {"content": "x"}}]})))
            .unwrap()
            .is_empty());
        let mut d = Decoder::new();
        d.event(&data(
            &json!({"choices": [{"delta": {"content": "partial"}}]}),
        ))
        .unwrap();
        assert_eq!(d.event(&done), Err(DecodeError::Invalid));
        // A role chunk only, then `[DONE]` (llama-cpp-python cut short): nothing was said.
        let mut d = Decoder::new();
        d.event(&data(
            &json!({"choices": [{"delta": {"role": "assistant"}}]}),
        ))
        .unwrap();
        assert!(d.said_nothing());
        assert_eq!(d.event(&done), Err(DecodeError::Empty));
        let mut d = Decoder::new();
        d.event(&data(
            &json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
        ))
        .unwrap();
        assert!(!d.said_nothing());
        assert_eq!(d.event(&done).unwrap(), []);
    }

    #[test]
    fn refusal_is_text_and_object_arguments_are_text() {
        let refusal = json!({"choices": [{"delta": {"content": null, "refusal": "No."}}]});
        assert_eq!(
            Decoder::new().event(&data(&refusal)).unwrap(),
            [TextDelta("No.".into())]
        );
        // Ollama's native shape sends the arguments as an object.
        let mut d = Decoder::new();
        let f = json!({"index": 0, "id": "o", "function": {"name": "f", "arguments": {"a": 1}}});
        d.event(&frag(f)).unwrap();
        let end = json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]});
        assert_eq!(
            d.event(&data(&end)).unwrap(),
            [call("o", "f", json!({"a": 1})), Stop(StopReason::ToolUse)]
        );
    }

    #[test]
    fn malformed_chunks_are_invalid() {
        for bad in [
            "{not json",
            "[1]",
            r#"{"choices": {}}"#,
            r#"{"choices": [{"delta": {"content": 5}}]}"#,
            r#"{"choices": [{"delta": {"tool_calls": [{"index": -1}]}}]}"#,
            r#"{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": 3}}]}}]}"#,
            r#"{"choices": [], "usage": {"prompt_tokens": "many"}}"#,
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
        // A call that never got a name cannot be answered.
        let mut d = Decoder::new();
        d.event(&frag(json!({"index": 0, "function": {"arguments": "{}"}})))
            .unwrap();
        let end = json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]});
        assert_eq!(d.event(&data(&end)), Err(DecodeError::Invalid));
    }

    #[test]
    fn call_count_is_bounded() {
        let mut d = Decoder::new();
        for n in 0..STEP_CALLS {
            let f = json!({"index": n, "id": format!("c{n}"), "function": {"name": "f"}});
            d.event(&frag(f)).unwrap();
        }
        let over = json!({"index": STEP_CALLS, "id": "x", "function": {"name": "f"}});
        assert_eq!(d.event(&frag(over)), Err(DecodeError::Invalid));
        // The largest accepted count is all emitted.
        let mut d = Decoder::new();
        for n in 0..STEP_CALLS {
            d.event(&frag(json!({"index": n, "function": {"name": "f"}})))
                .unwrap();
        }
        let end = json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]});
        assert_eq!(d.event(&data(&end)).unwrap().len(), STEP_CALLS + 1);
    }

    #[test]
    fn call_arguments_are_bounded() {
        let args = |n: usize| {
            frag(
                json!({"index": 0, "id": "a", "function": {"name": "f", "arguments": "x".repeat(n)}}),
            )
        };
        let mut d = Decoder::new();
        d.event(&args(CALL_BYTES)).unwrap();
        let more = frag(json!({"index": 0, "function": {"arguments": "y"}}));
        assert_eq!(d.event(&more), Err(DecodeError::Invalid));
        let mut d = Decoder::new();
        d.event(&args(CALL_BYTES - 1)).unwrap();
        d.event(&more).unwrap();
    }

    #[test]
    fn step_bytes_are_bounded() {
        // Two calls with one-byte IDs and names: 2 + CALL_BYTES, then 2 + the rest.
        let rest = STEP_BYTES - 2 - CALL_BYTES - 2;
        let call = |id: &str, n: usize| {
            frag(json!({"index": if id == "a" { 0 } else { 1 }, "id": id,
                "function": {"name": "f", "arguments": "x".repeat(n)}}))
        };
        let mut d = Decoder::new();
        d.event(&call("a", CALL_BYTES)).unwrap();
        d.event(&call("b", rest)).unwrap();
        let more = frag(json!({"index": 1, "function": {"arguments": "y"}}));
        assert_eq!(d.event(&more), Err(DecodeError::Invalid));
        let mut d = Decoder::new();
        d.event(&call("a", CALL_BYTES)).unwrap();
        d.event(&call("b", rest - 1)).unwrap();
        d.event(&more).unwrap();
    }

    fn request<'a>(items: &'a [Item], tools: &'a [ToolSpec], effort: Option<&'a str>) -> Value {
        request_body(&ModelRequest {
            model: "m1",
            provider: "local",
            instructions: "Be brief.",
            items,
            tools,
            effort,
            thinking: Thinking::Adaptive,
            max_output_tokens: 16_384,
        })
    }

    #[test]
    fn request_after_tool_results() {
        let items = [
            Item::User {
                text: "read both".into(),
            },
            Item::Assistant {
                text: "Reading.".into(),
            },
            Item::ProviderItem {
                provider: "local".into(),
                item: json!({"type": "reasoning"}),
            },
            Item::ToolCall {
                call_id: "call_A".into(),
                name: "read_file".into(),
                input: json!({"path": "a.rs"}),
            },
            Item::ToolCall {
                call_id: "call_B".into(),
                name: "read_file".into(),
                input: Value::String("{bad".into()),
            },
            Item::ToolResult {
                call_id: "call_A".into(),
                output: "fn a() {}".into(),
                is_error: false,
            },
            Item::ToolResult {
                call_id: "call_B".into(),
                output: "error: input is not a JSON object".into(),
                is_error: true,
            },
            Item::ToolCall {
                call_id: "call_C".into(),
                name: "list_dir".into(),
                input: json!({}),
            },
            Item::ToolResult {
                call_id: "call_C".into(),
                output: "a.rs".into(),
                is_error: false,
            },
            Item::Assistant {
                text: "Done.".into(),
            },
            Item::User {
                text: "thanks".into(),
            },
        ];
        let tools = [ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            input_schema: json!({"type": "object"}),
        }];
        let want = json!({
            "model": "m1",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "read both"},
                {"role": "assistant", "content": "Reading.", "tool_calls": [
                    {"id": "call_A", "type": "function",
                        "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}},
                    {"id": "call_B", "type": "function",
                        "function": {"name": "read_file", "arguments": "{bad"}},
                ]},
                {"role": "tool", "tool_call_id": "call_A", "content": "fn a() {}"},
                {"role": "tool", "tool_call_id": "call_B", "content": "error: input is not a JSON object"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_C", "type": "function",
                        "function": {"name": "list_dir", "arguments": "{}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_C", "content": "a.rs"},
                {"role": "assistant", "content": "Done."},
                {"role": "user", "content": "thanks"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file", "description": "Reads a file.",
                "parameters": {"type": "object"}}}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 16_384,
        });
        assert_eq!(request(&items, &tools, None), want);
    }

    #[test]
    fn request_effort_and_empty_parts() {
        let items = [Item::User { text: "hi".into() }];
        let body = request(&items, &[], Some("high"));
        assert_eq!(body["reasoning_effort"], "high");
        assert!(body.get("tools").is_none());
        assert!(request(&items, &[], None).get("reasoning_effort").is_none());
        let no_system = request_body(&ModelRequest {
            model: "m1",
            provider: "local",
            instructions: "",
            items: &items,
            tools: &[],
            effort: None,
            thinking: Thinking::Adaptive,
            max_output_tokens: 1,
        });
        assert_eq!(
            no_system["messages"],
            json!([{"role": "user", "content": "hi"}])
        );
    }

    #[test]
    fn error_bodies() {
        let body = br#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert!(error_body_is_overflow(body));
        assert!(error_body_is_overflow(
            br#"{"error":{"message":"x","type":"context_length_exceeded"}}"#
        ));
        assert!(!error_body_is_overflow(
            br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#
        ));
        assert!(!error_body_is_overflow(b"<html>502</html>"));
        assert!(!error_body_is_overflow(br#"{"message":"context window"}"#));
    }

    #[test]
    fn fuzz_corpus_replays() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/openai_chat");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            fuzz(&std::fs::read(entry.unwrap().path()).unwrap());
            n += 1;
        }
        assert!(n > 1, "seeds in {dir}");
    }

    #[test]
    fn fuzz_entry_takes_fixtures_and_garbage() {
        fuzz(include_bytes!("fixtures/openai_chat/parallel_usage.sse"));
        fuzz(b"\x05data: [DONE]\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n");
        fuzz(b"");
        fuzz(b"\xffdata: \xff\n\n");
    }
}

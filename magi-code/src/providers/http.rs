//! Streaming one reply over SSE with ureq on the run's thread: the OpenAI Chat Completions
//! API (and configured OpenAI-compatible servers) and the Anthropic Messages API.

use super::target::{Api, Target};
use crate::util::cancel::Cancel;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

/// Longest SSE line accepted.
pub const SSE_LINE_BYTES: usize = 1 << 20;
/// Most response bytes read from one stream.
pub const STREAM_BYTES: u64 = 64 << 20;
/// Idle guard between two reads of a stream.
pub const READ_IDLE: Duration = Duration::from_secs(60);

/// Why a stream failed; all become `execution_failed` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderError {
    /// Connecting or reading failed or timed out.
    Transport,
    /// The provider answered an HTTP error status.
    Status,
    /// The stream was malformed or over its bounds.
    Protocol,
    /// The provider reported an error event.
    Remote,
    /// The run was cancelled.
    Cancelled,
}

/// Streams one reply for `messages` (`role`, `text` pairs ending with the new user prompt),
/// calling `on_text` for every text delta; `on_text` returning false stops the stream.
pub fn stream(
    t: &Target,
    messages: &[(&str, String)],
    cancel: &Cancel,
    on_text: &mut dyn FnMut(&str) -> bool,
) -> Result<(), ProviderError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(10)))
        .timeout_recv_response(Some(Duration::from_secs(120)))
        .timeout_per_read(Some(READ_IDLE))
        .http_status_as_error(false)
        .build()
        .into();
    let msgs: Vec<Value> = messages
        .iter()
        .map(|(r, c)| json!({"role": r, "content": c}))
        .collect();
    let (url, body) = match t.api {
        Api::OpenAi => (
            format!("{}/chat/completions", t.base_url),
            json!({"model": t.model, "messages": msgs, "stream": true}),
        ),
        Api::Anthropic => (
            format!("{}/v1/messages", t.base_url),
            json!({"model": t.model, "messages": msgs, "stream": true, "max_tokens": 4096}),
        ),
    };
    let req = t.authorize(
        agent
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream"),
    );
    if cancel.is_cancelled() {
        return Err(ProviderError::Cancelled);
    }
    let resp = req
        .send(body.to_string().as_bytes())
        .map_err(|_| ProviderError::Transport)?;
    if !resp.status().is_success() {
        return Err(ProviderError::Status);
    }
    let reader = resp.into_body().into_reader().take(STREAM_BYTES);
    let mut lines = BufReader::new(reader);
    let mut line = Vec::new();
    let mut data = String::new();
    loop {
        if cancel.is_cancelled() {
            return Err(ProviderError::Cancelled);
        }
        line.clear();
        let n = (&mut lines)
            .take(SSE_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|_| ProviderError::Transport)?;
        if n == 0 {
            // The stream ended without its terminator.
            return Err(ProviderError::Protocol);
        }
        if line.len() > SSE_LINE_BYTES {
            return Err(ProviderError::Protocol);
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| ProviderError::Protocol)?
            .trim_end_matches(['\n', '\r']);
        if let Some(d) = text.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
            continue;
        }
        if !text.is_empty() || data.is_empty() {
            // `event:`, `id:`, comments and blank keep-alives carry nothing we need.
            continue;
        }
        // A blank line dispatches the event.
        let payload = std::mem::take(&mut data);
        match t.api {
            Api::OpenAi => {
                if payload == "[DONE]" {
                    return Ok(());
                }
                let v: Value =
                    serde_json::from_str(&payload).map_err(|_| ProviderError::Protocol)?;
                if v.get("error").is_some() {
                    return Err(ProviderError::Remote);
                }
                if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
                    if !c.is_empty() && !on_text(c) {
                        return Ok(());
                    }
                }
            }
            Api::Anthropic => {
                let v: Value =
                    serde_json::from_str(&payload).map_err(|_| ProviderError::Protocol)?;
                match v["type"].as_str() {
                    Some("content_block_delta") => {
                        if let Some(c) = v["delta"]["text"].as_str() {
                            if !c.is_empty() && !on_text(c) {
                                return Ok(());
                            }
                        }
                    }
                    Some("message_stop") => return Ok(()),
                    Some("error") => return Err(ProviderError::Remote),
                    _ => {}
                }
            }
        }
    }
}

//! HTTP providers: the OpenAI Chat Completions API (and configured OpenAI-compatible servers)
//! and the Anthropic Messages API, both streamed over SSE with ureq on the run's thread.

use crate::cancel::Cancel;
use crate::startup::{self, Runtime};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

/// Longest SSE line accepted.
pub const SSE_LINE_BYTES: usize = 1 << 20;
/// Most response bytes read from one stream.
pub const STREAM_BYTES: u64 = 64 << 20;
/// Idle guard between two reads of a stream.
pub const READ_IDLE: Duration = Duration::from_secs(60);

/// Which wire API a target speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST {base}/chat/completions` with `stream: true`.
    OpenAi,
    /// `POST {base}/v1/messages` with `stream: true`.
    Anthropic,
}

/// A locally ready HTTP provider.
#[derive(Clone)]
pub struct Target {
    /// The wire API.
    pub api: Api,
    /// Base URL without a trailing slash.
    pub base_url: String,
    /// The key, if the provider needs one.
    key: Option<String>,
    /// The model.
    pub model: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("Target")
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish()
    }
}

impl Target {
    /// Adds the provider's authentication headers.
    pub fn authorize<B>(&self, req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match (self.api, &self.key) {
            (Api::OpenAi, Some(k)) => req.header("authorization", &format!("Bearer {k}")),
            (Api::Anthropic, Some(k)) => req
                .header("x-api-key", k)
                .header("anthropic-version", "2023-06-01"),
            _ => req,
        }
    }
}

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

/// The HTTP target of a selection, if that provider is an HTTP one and locally ready.
#[must_use]
pub fn target(rt: &Runtime, provider: &str, model: &str) -> Option<Target> {
    let s = &rt.settings;
    let (api, base_url, key) = match provider {
        "openai" => (
            Api::OpenAi,
            s.builtin_base_urls
                .get("openai")
                .cloned()
                .unwrap_or_else(|| "https://api.openai.com/v1".into()),
            Some(startup::api_key("openai", &rt.root)?),
        ),
        "anthropic" => (
            Api::Anthropic,
            s.builtin_base_urls
                .get("anthropic")
                .cloned()
                .unwrap_or_else(|| "https://api.anthropic.com".into()),
            Some(startup::api_key("anthropic", &rt.root)?),
        ),
        other => {
            let c = s.compat.get(other)?;
            let key = match &c.api_key_env {
                Some(var) => Some(std::env::var(var).ok().filter(|k| !k.is_empty())?),
                None => None,
            };
            (Api::OpenAi, c.base_url.clone(), key)
        }
    };
    Some(Target {
        api,
        base_url: base_url.trim_end_matches('/').to_owned(),
        key,
        model: model.to_owned(),
    })
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
    let mut req = agent
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream");
    match (t.api, &t.key) {
        (Api::OpenAi, Some(k)) => req = req.header("authorization", &format!("Bearer {k}")),
        (Api::Anthropic, Some(k)) => {
            req = req
                .header("x-api-key", k)
                .header("anthropic-version", "2023-06-01")
        }
        _ => {}
    }
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

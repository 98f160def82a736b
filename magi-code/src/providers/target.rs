//! Which HTTP provider a selection names, whether a provider is locally ready, and its key.

use crate::config::settings::{self, Settings};
use crate::runtime::Runtime;
use std::path::Path;

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
            Some(api_key("openai", &rt.root)?),
        ),
        "anthropic" => (
            Api::Anthropic,
            s.builtin_base_urls
                .get("anthropic")
                .cloned()
                .unwrap_or_else(|| "https://api.anthropic.com".into()),
            Some(api_key("anthropic", &rt.root)?),
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

/// Whether the selected provider/model is locally ready (no network).
pub fn provider_ready(s: &Settings, root: &Path) -> bool {
    match s.provider.as_str() {
        "scripted" => match s.model.as_str() {
            "echo" => true,
            "script" => s
                .scripted_script
                .as_deref()
                .is_some_and(|p| Path::new(p).is_file()),
            _ => false,
        },
        p @ ("anthropic" | "openai") => api_key(p, root).is_some(),
        other => match s.compat.get(other) {
            Some(c) => c
                .api_key_env
                .as_ref()
                .is_none_or(|v| std::env::var_os(v).is_some_and(|k| !k.is_empty())),
            None => false,
        },
    }
}

/// The API key of a built-in provider: its environment variable, else `credentials.json`
/// (`{"<provider>": {"api_key": "..."}}`, read with a 1 MiB bound).
pub fn api_key(provider: &str, root: &Path) -> Option<String> {
    let var = match provider {
        "anthropic" => "ANTHROPIC_API_KEY",
        "openai" => "OPENAI_API_KEY",
        _ => return None,
    };
    if let Some(k) = std::env::var(var).ok().filter(|k| !k.is_empty()) {
        return Some(k);
    }
    let creds = settings::read_file(&root.join("credentials.json")).ok()??;
    creds
        .get(provider)?
        .get("api_key")?
        .as_str()
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
}

//! Which HTTP provider a selection names, whether a provider is locally ready, and its key.

pub use crate::config::providers::Api;
use crate::config::providers::{self, Kind, WireApi};
use crate::config::settings::{self, Settings};
use crate::runtime::Runtime;
use crate::util::cancel::Cancel;
use std::path::Path;

/// Where a `codex` target's sign-in lives and is refreshed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexAuth {
    /// The `auth.json` path.
    pub path: std::path::PathBuf,
    /// The token endpoint's origin, without a trailing slash.
    pub auth_url: String,
}

/// A locally ready HTTP provider.
#[derive(Clone)]
pub struct Target {
    /// Authentication and listing conventions.
    pub api: Api,
    /// The wire API of its streaming requests.
    pub wire: WireApi,
    /// The provider's settings name.
    pub provider: String,
    /// The output bound of every request.
    pub max_output_tokens: u64,
    /// Base URL without a trailing slash.
    pub base_url: String,
    /// The key, if the provider needs one.
    key: Option<String>,
    /// The model.
    pub model: String,
    /// The sign-in of a `codex` target.
    pub codex: Option<CodexAuth>,
    /// Whether requests carry cache markers (`providers.<name>.prompt_caching`).
    pub prompt_caching: bool,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("Target")
            .field("api", &self.api)
            .field("wire", &self.wire)
            .field("provider", &self.provider)
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

/// A keyless OpenAI-compatible Chat target at `base_url`, for unit tests of the HTTP client.
#[cfg(test)]
#[must_use]
pub fn local_chat(base_url: &str) -> Target {
    Target {
        api: Api::OpenAi,
        wire: WireApi::OpenAiChat,
        provider: "local".to_owned(),
        max_output_tokens: 64,
        base_url: base_url.to_owned(),
        key: None,
        model: "tiny".to_owned(),
        codex: None,
        prompt_caching: true,
    }
}

/// The HTTP target of a selection, if that provider is an HTTP one and locally ready.
#[must_use]
pub fn target(rt: &Runtime, provider: &str, model: &str) -> Option<Target> {
    let s = &rt.settings;
    let mut codex = None;
    let (api, wire, base_url, key) = match providers::builtin(provider).map(|r| r.kind) {
        Some(Kind::Offline { .. } | Kind::AgentCli { .. }) => return None,
        Some(Kind::Http {
            api,
            wire,
            base_url,
            key_env,
        }) => {
            let key = match key_env {
                Some(_) => Some(api_key(provider, &rt.root)?),
                None => None,
            };
            if api == Api::Codex {
                if !super::codex::ready_now() {
                    return None;
                }
                codex = Some(CodexAuth {
                    path: super::codex::auth_path()?,
                    auth_url: s
                        .codex_auth_url
                        .clone()
                        .unwrap_or_else(|| super::codex::DEFAULT_AUTH_URL.into())
                        .trim_end_matches('/')
                        .to_owned(),
                });
            }
            let base = s.builtin_base_urls.get(provider).cloned();
            (api, wire, base.unwrap_or_else(|| base_url.into()), key)
        }
        None => {
            let c = s.compat.get(provider)?;
            let key = match &c.api_key_env {
                Some(var) => Some(loaded(std::env::var(var).ok().filter(|k| !k.is_empty())?)),
                None => None,
            };
            (Api::OpenAi, c.wire_api, c.base_url.clone(), key)
        }
    };
    Some(Target {
        api,
        wire,
        provider: provider.to_owned(),
        max_output_tokens: s.max_output_tokens_of(provider),
        base_url: base_url.trim_end_matches('/').to_owned(),
        key,
        model: model.to_owned(),
        codex,
        prompt_caching: !s.no_prompt_caching.contains(provider),
    })
}

/// Whether the selected provider/model is locally ready (no network).
pub fn provider_ready(s: &Settings, root: &Path) -> bool {
    match providers::builtin(&s.provider).map(|r| r.kind) {
        Some(Kind::Offline { .. }) => match s.model.as_str() {
            providers::ECHO => true,
            providers::SCRIPT => s
                .scripted_script
                .as_deref()
                .is_some_and(|p| Path::new(p).is_file()),
            _ => false,
        },
        _ => keyed(s, root, &s.provider),
    }
}

/// Whether an HTTP provider's credentials are at hand: its key (variable or
/// `credentials.json`), the Codex CLI's sign-in, or a configured provider's `api_key_env`
/// set (or none needed). False for the offline provider and for unknown names.
#[must_use]
pub fn keyed(s: &Settings, root: &Path, provider: &str) -> bool {
    match providers::builtin(provider).map(|r| r.kind) {
        Some(Kind::Offline { .. }) => false,
        Some(Kind::AgentCli { .. }) => cli_status(s, provider, &Cancel::default()).ready(),
        Some(Kind::Http {
            api: Api::Codex, ..
        }) => super::codex::ready_now(),
        Some(Kind::Http { .. }) => api_key(provider, root).is_some(),
        None => s.compat.get(provider).is_some_and(|c| {
            c.api_key_env
                .as_ref()
                .is_none_or(|v| std::env::var_os(v).is_some_and(|k| !k.is_empty()))
        }),
    }
}

/// An agent CLI provider's own readiness check (`auth status --json`, bounded and
/// cancellable), with the CLI's environment.
#[must_use]
pub fn cli_status(s: &Settings, provider: &str, cancel: &Cancel) -> super::cli_auth::Status {
    let Some(Kind::AgentCli { command, .. }) = providers::builtin(provider).map(|r| r.kind) else {
        return super::cli_auth::Status::Missing;
    };
    let command = s.cli_commands.get(provider).map_or(command, String::as_str);
    let env = super::cli_auth::cli_env(&key_vars(s));
    super::cli_auth::auth_status(command, &env, super::cli_auth::STATUS_BOUND, cancel)
}

/// How an agent CLI provider's process starts in folder `cwd`: its command (the setting, else
/// the row's) and the CLI's environment; `None` for any other provider.
#[must_use]
pub fn cli_launch(
    s: &Settings,
    provider: &str,
    cwd: &Path,
    transcript_budget: usize,
) -> Option<super::claude_proc::Launch> {
    let Some(Kind::AgentCli { command, .. }) = providers::builtin(provider).map(|r| r.kind) else {
        return None;
    };
    Some(super::claude_proc::Launch {
        command: s
            .cli_commands
            .get(provider)
            .map_or(command, String::as_str)
            .to_owned(),
        env: super::cli_auth::cli_env(&key_vars(s)),
        cwd: cwd.to_path_buf(),
        transcript_budget,
    })
}

/// Every provider key variable the settings name: the built-ins' and each configured
/// provider's `api_key_env`.
fn key_vars(s: &Settings) -> Vec<String> {
    let builtin = providers::BUILTIN.iter().filter_map(|r| match r.kind {
        Kind::Http { key_env, .. } => key_env.map(str::to_owned),
        _ => None,
    });
    builtin
        .chain(s.compat.values().filter_map(|c| c.api_key_env.clone()))
        .collect()
}

/// Loads every provider key the settings name (the built-ins' and each configured
/// `api_key_env`), so redaction knows them before any text is shown (`decisions.md` 35 (a)).
pub fn load_keys(s: &Settings, root: &Path) {
    for p in providers::names() {
        let _ = api_key(p, root);
    }
    if let Some(path) = super::codex::auth_path() {
        let _ = super::codex::load(&path);
    }
    for c in s.compat.values() {
        if let Some(k) = c.api_key_env.as_ref().and_then(|v| std::env::var(v).ok()) {
            loaded(k);
        }
    }
}

/// A key the backend loaded: known to redaction from now on (`decisions.md` 35 (a)).
fn loaded(key: String) -> String {
    crate::util::redact::register_secret(&key);
    key
}

/// The API key of a built-in provider: its environment variable, else `credentials.json`
/// (`{"<provider>": {"api_key": "..."}}`, read with a 1 MiB bound). Redaction knows it from
/// then on.
pub fn api_key(provider: &str, root: &Path) -> Option<String> {
    let Kind::Http {
        key_env: Some(var), ..
    } = providers::builtin(provider)?.kind
    else {
        return None;
    };
    if let Some(k) = std::env::var(var).ok().filter(|k| !k.is_empty()) {
        return Some(loaded(k));
    }
    let creds = settings::read_file(&root.join("credentials.json")).ok()??;
    creds
        .get(provider)?
        .get("api_key")?
        .as_str()
        .filter(|k| !k.is_empty())
        .map(|k| loaded(k.to_owned()))
}

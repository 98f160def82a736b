//! The built-in providers, one row each (`backend.md` "Providers"): how each is reached,
//! authenticated, listed, found ready and given effort. Code asks a provider's row and
//! branches on its fields; a provider's name is spelled here and nowhere else.

/// Which wire API an HTTP provider speaks (built in, or configured `openai-compatible`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireApi {
    /// The Anthropic Messages API: `POST {base}/v1/messages`; effort as `thinking`.
    AnthropicMessages,
    /// The OpenAI Responses API: `POST {base}/responses`; effort as `reasoning.effort`.
    OpenAiResponses,
    /// OpenAI Chat Completions: `POST {base}/chat/completions`; effort as `reasoning_effort`.
    OpenAiChat,
}

/// Whose conventions an HTTP provider follows for its authentication and model listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `authorization: Bearer <key>`, `GET {base}/models`.
    OpenAi,
    /// `x-api-key` and `anthropic-version`, `GET {base}/v1/models`.
    Anthropic,
    /// The Codex CLI's ChatGPT sign-in (`auth.json`), `GET {base}/models`.
    Codex,
}

/// How a built-in provider is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// In the backend, offline: a fixed list of models, no key, no catalog file, no
    /// conversation read (`providers.<name>` takes `script` and `startup_delay_ms`).
    Offline {
        /// Its models.
        models: &'static [&'static str],
    },
    /// Over HTTP.
    Http {
        /// Authentication and listing.
        api: Api,
        /// The streaming requests' wire API.
        wire: WireApi,
        /// Where it is, unless `providers.<name>.base_url` says otherwise.
        base_url: &'static str,
        /// The variable holding its key (else `credentials.json` under its name); `None`
        /// when it signs in otherwise.
        key_env: Option<&'static str>,
    },
    /// A native agent CLI that runs its own loop and its own sign-in (`backend.md` "Claude
    /// through the native CLI"): ready when its `auth status --json` says so; its models are
    /// built in (`providers.<name>.command` names the executable).
    AgentCli {
        /// The executable unless `providers.<name>.command` says otherwise.
        command: &'static str,
        /// Its models with effort control, then those without.
        models: &'static [&'static str],
        /// How many of `models`, from the first, take an effort.
        with_effort: usize,
    },
}

/// One built-in provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// Its settings name.
    pub name: &'static str,
    /// Its name for people (the catalog's `provider_name`).
    pub display: &'static str,
    /// How it is reached.
    pub kind: Kind,
}

/// The offline provider, the default selection.
pub const SCRIPTED: Row = Row {
    name: "scripted",
    display: "Scripted",
    kind: Kind::Offline {
        models: &[ECHO, SCRIPT],
    },
};

/// The offline model that answers with the input.
pub const ECHO: &str = "echo";
/// The offline model that plays `providers.scripted.script`.
pub const SCRIPT: &str = "script";

/// The Claude Code CLI signed in with a Claude plan.
pub const CLAUDE_SUBSCRIPTION: Row = Row {
    name: "claude-subscription",
    display: "Claude (subscription)",
    kind: Kind::AgentCli {
        command: "claude",
        models: &["opus", "sonnet", "haiku"],
        with_effort: 2,
    },
};

/// The efforts an agent CLI's models take (`backend.md`: `opus` and `sonnet`).
pub const CLI_EFFORTS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

/// Every built-in provider, in name order.
pub const BUILTIN: [Row; 5] = [
    Row {
        name: "anthropic",
        display: "Anthropic",
        kind: Kind::Http {
            api: Api::Anthropic,
            wire: WireApi::AnthropicMessages,
            base_url: "https://api.anthropic.com",
            key_env: Some("ANTHROPIC_API_KEY"),
        },
    },
    CLAUDE_SUBSCRIPTION,
    Row {
        name: "codex",
        display: "Codex",
        kind: Kind::Http {
            api: Api::Codex,
            wire: WireApi::OpenAiResponses,
            base_url: "https://chatgpt.com/backend-api/codex",
            key_env: None,
        },
    },
    Row {
        name: "openai",
        display: "OpenAI",
        kind: Kind::Http {
            api: Api::OpenAi,
            wire: WireApi::OpenAiResponses,
            base_url: "https://api.openai.com/v1",
            key_env: Some("OPENAI_API_KEY"),
        },
    },
    SCRIPTED,
];

/// The built-in provider called `name`.
#[must_use]
pub fn builtin(name: &str) -> Option<&'static Row> {
    BUILTIN.iter().find(|r| r.name == name)
}

/// Whether `name` is an agent CLI (which runs its own loop and sign-in).
#[must_use]
pub fn is_agent_cli(name: &str) -> bool {
    builtin(name).is_some_and(|r| matches!(r.kind, Kind::AgentCli { .. }))
}

/// Whether `name` is the offline provider (which reads no conversation and has no window).
#[must_use]
pub fn is_offline(name: &str) -> bool {
    builtin(name).is_some_and(|r| matches!(r.kind, Kind::Offline { .. }))
}

/// The built-in providers' names, in name order.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|r| r.name)
}

impl Row {
    /// The keys `providers.<name>` may hold for this provider.
    #[must_use]
    pub fn settings_keys(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Offline { .. } => &["script", "startup_delay_ms"],
            Kind::AgentCli { .. } => &["command"],
            Kind::Http {
                api: Api::Codex, ..
            } => &[
                "base_url",
                "auth_url",
                "max_output_tokens",
                "context_window",
                "prompt_caching",
            ],
            Kind::Http { .. } => &[
                "base_url",
                "max_output_tokens",
                "context_window",
                "prompt_caching",
            ],
        }
    }

    /// The wire API of an HTTP provider.
    #[must_use]
    pub const fn wire(&self) -> Option<WireApi> {
        match self.kind {
            Kind::Http { wire, .. } => Some(wire),
            Kind::Offline { .. } | Kind::AgentCli { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_in_name_order_each_once_and_the_offline_one_is_the_default() {
        let names: Vec<&str> = names().collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        assert_eq!(builtin(SCRIPTED.name), Some(&SCRIPTED));
        assert!(is_offline(SCRIPTED.name) && !is_offline("anthropic") && !is_offline("nope"));
        assert!(builtin("local").is_none());
    }
}

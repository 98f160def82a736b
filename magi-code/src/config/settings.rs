//! Settings: global `MC_HOME/settings.json` and project `<cwd>/.magi/settings.json`, strictly
//! validated (unknown keys, wrong types, out-of-range values → `configuration_invalid`), merged
//! with project precedence except MCP approval, which only global settings grant.

use protocol_core::json::parse_strict;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Largest settings file read.
pub const SETTINGS_FILE_BYTES: u64 = 1 << 20;
/// Providers in all, built-ins included.
pub const MAX_PROVIDERS: usize = protocol_core::limits::CATALOG_PROVIDERS;
/// Longest scripted startup delay.
pub const MAX_STARTUP_DELAY_MS: u64 = 10_000;
/// The built-in providers.
/// `runner.max_steps`: default and largest (runner.md §2).
pub const DEFAULT_MAX_STEPS: u32 = 200;
/// Largest `runner.max_steps`.
pub const MAX_MAX_STEPS: u32 = 1_000;
/// `runner.context_window` in tokens: default, smallest and largest (runner.md §7).
pub const DEFAULT_CONTEXT_WINDOW: u64 = 200_000;
/// Smallest `runner.context_window`.
pub const MIN_CONTEXT_WINDOW: u64 = 1_000;
/// Largest `runner.context_window`.
pub const MAX_CONTEXT_WINDOW: u64 = 10_000_000;
/// `providers.<name>.max_output_tokens` when unset (runner.md §5).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 16_384;
/// Largest `providers.<name>.max_output_tokens`.
pub const MAX_MAX_OUTPUT_TOKENS: u64 = 1_000_000;
/// Most `instructions` paths: each is opened at startup, so a long list must not stall it.
pub const MAX_INSTRUCTION_PATHS: usize = 64;

pub use super::code_mode::CodeMode;
pub use super::invalid::Invalid;
use super::invalid::{obj, string};
pub use super::policy::Policy;

type R<T> = Result<T, Invalid>;

pub use super::providers::WireApi;

/// A configured OpenAI-compatible provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompatProvider {
    /// Base URL of the API (`…/v1`).
    pub base_url: String,
    /// Environment variable holding its key, if it needs one.
    pub api_key_env: Option<String>,
    /// `wire_api`: Chat Completions unless `"responses"`.
    pub wire_api: WireApi,
}

pub use super::mcp_servers::McpServer;

/// Merged, validated settings of one child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Selected provider.
    pub provider: String,
    /// Selected model.
    pub model: String,
    /// Requested effort (`default` means no override).
    pub effort: String,
    /// `providers.catalog.enabled` (`provider/model`).
    pub catalog_enabled: Vec<String>,
    /// `providers.scripted.script`.
    pub scripted_script: Option<String>,
    /// `providers.<name>.command` of an agent CLI provider (its executable).
    pub cli_commands: BTreeMap<String, String>,
    /// `providers.scripted.startup_delay_ms`.
    pub startup_delay_ms: u64,
    /// `base_url` overrides of the built-in HTTP providers.
    pub builtin_base_urls: BTreeMap<String, String>,
    /// `providers.codex.auth_url`: the token endpoint's origin of the `codex` provider.
    pub codex_auth_url: Option<String>,
    /// Configured OpenAI-compatible providers.
    pub compat: BTreeMap<String, CompatProvider>,
    /// `providers.<name>.max_output_tokens` where set (built-in HTTP and configured
    /// providers); read it through [`Settings::max_output_tokens_of`].
    pub max_output_tokens: BTreeMap<String, u64>,
    /// `providers.<name>.context_window` where set; read it through
    /// [`Settings::context_window_of`].
    pub context_windows: BTreeMap<String, u64>,
    /// The providers whose `prompt_caching` is `false` (`runner.md` 1, "Prompt caching").
    pub no_prompt_caching: BTreeSet<String>,
    /// `runner.max_steps`: steps per turn before the run fails with `step_limit`.
    pub max_steps: u32,
    /// `runner.context_window`: tokens assumed when the catalog names no window.
    pub context_window: u64,
    /// Additional instruction files (as written; relative ones resolve against the cwd).
    pub instructions: Vec<String>,
    /// MCP servers by name.
    pub mcp_servers: BTreeMap<String, McpServer>,
    /// SHA-256 digests of approved canonical definitions (global settings only).
    pub mcp_approved: Vec<String>,
    /// Policy for reading tools.
    pub tool_read: Policy,
    /// Policy for writing tools.
    pub tool_write: Policy,
    /// Policy for the shell tool.
    pub tool_shell: Policy,
    /// Policy for `client.tools` tools (run by the client).
    pub tool_client: Policy,
    /// Policy for MCP servers' tools (`tools.mcp`, default ask).
    pub tool_mcp: Policy,
    /// Policy for `task` (subagents; `tools.task`, default allow).
    pub tool_task: Policy,
    /// Policy for a direct `exec` call (`tools.code`, default allow: it acts only through
    /// tools, each under `code_mode.tools`).
    pub tool_code: Policy,
    /// Retention of old sessions in days (0 disables pruning).
    pub retention_days: u64,
    /// `agent`: the primary profile's name, if any.
    pub agent: Option<String>,
    /// `agents.disabled`: profiles `task` refuses.
    pub agents_disabled: Vec<String>,
    /// `skills.disabled`: skills left out of the prompt.
    pub skills_disabled: Vec<String>,
    /// `hooks` (global settings only).
    pub hooks: super::hooks::Hooks,
    /// `code_mode` (`code-mode.md` 2).
    pub code_mode: CodeMode,
    /// `shell_env.keep`: names the secrets rule would withhold that the children still get.
    pub shell_env_keep: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            provider: super::providers::SCRIPTED.name.into(),
            model: "echo".into(),
            effort: "default".into(),
            catalog_enabled: Vec::new(),
            scripted_script: None,
            cli_commands: BTreeMap::new(),
            startup_delay_ms: 0,
            builtin_base_urls: BTreeMap::new(),
            codex_auth_url: None,
            compat: BTreeMap::new(),
            max_output_tokens: BTreeMap::new(),
            context_windows: BTreeMap::new(),
            no_prompt_caching: BTreeSet::new(),
            max_steps: DEFAULT_MAX_STEPS,
            context_window: DEFAULT_CONTEXT_WINDOW,
            instructions: Vec::new(),
            mcp_servers: BTreeMap::new(),
            mcp_approved: Vec::new(),
            tool_read: Policy::Allow,
            tool_write: Policy::Ask,
            tool_shell: Policy::Ask,
            tool_client: Policy::Allow,
            tool_mcp: Policy::Ask,
            tool_task: Policy::Allow,
            tool_code: Policy::Allow,
            retention_days: 30,
            agent: None,
            agents_disabled: Vec::new(),
            skills_disabled: Vec::new(),
            hooks: super::hooks::Hooks::default(),
            code_mode: CodeMode::default(),
            shell_env_keep: Vec::new(),
        }
    }
}

impl Settings {
    /// The output-token bound of every request to `provider`: its setting, else 16,384.
    #[must_use]
    pub fn max_output_tokens_of(&self, provider: &str) -> u64 {
        self.max_output_tokens
            .get(provider)
            .copied()
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
    }
}

impl Settings {
    /// The context window assumed for `provider` when the catalog names none
    /// (`decisions.md` 45): its `context_window`, else `runner.context_window`.
    #[must_use]
    pub fn context_window_of(&self, provider: &str) -> u64 {
        self.context_windows
            .get(provider)
            .copied()
            .unwrap_or(self.context_window)
    }
}

/// Reads a settings file: missing → `None`; unreadable, oversized, not strict JSON, or not an
/// object → invalid.
pub fn read_file(path: &Path) -> R<Option<Map<String, Value>>> {
    // O_NONBLOCK: a FIFO in the settings' place must fail the metadata check, not block.
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err(Invalid("unreadable")),
    };
    let meta = file.metadata().map_err(|_| Invalid("unreadable"))?;
    if !meta.is_file() {
        return Err(Invalid("not a file"));
    }
    let mut bytes = Vec::new();
    file.take(SETTINGS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| Invalid("unreadable"))?;
    if bytes.len() as u64 > SETTINGS_FILE_BYTES {
        return Err(Invalid("too large"));
    }
    let (value, dups) = parse_strict(&bytes).map_err(|_| Invalid("not JSON"))?;
    if !dups.top.is_empty() || dups.nested {
        return Err(Invalid("duplicate key"));
    }
    match value {
        Value::Object(m) => Ok(Some(m)),
        _ => Err(Invalid("not an object")),
    }
}

fn strings(v: &Value) -> R<Vec<String>> {
    v.as_array()
        .ok_or(Invalid("not an array"))?
        .iter()
        .map(string)
        .collect()
}

/// An integer in `lo..=hi` (JSON integers only: `5.0`, `-1` and `"5"` are rejected).
fn int(v: &Value, lo: u64, hi: u64, what: &'static str) -> R<u64> {
    v.as_u64()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or(Invalid(what))
}

fn max_output_tokens(c: &Map<String, Value>) -> R<Option<u64>> {
    c.get("max_output_tokens")
        .map(|v| int(v, 1, MAX_MAX_OUTPUT_TOKENS, "max_output_tokens"))
        .transpose()
}

/// `providers.<name>.context_window` into `s`, with `runner.context_window`'s bounds, and
/// `providers.<name>.prompt_caching` (a boolean, default true).
fn provider_window(s: &mut Settings, name: &str, c: &Map<String, Value>) -> R<()> {
    if let Some(v) = c.get("context_window") {
        let n = int(v, MIN_CONTEXT_WINDOW, MAX_CONTEXT_WINDOW, "context_window")?;
        s.context_windows.insert(name.to_owned(), n);
    }
    match c.get("prompt_caching") {
        None | Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => {
            s.no_prompt_caching.insert(name.to_owned());
        }
        Some(_) => return Err(Invalid("prompt_caching")),
    }
    Ok(())
}

fn policy(v: &Value) -> R<Policy> {
    super::policy::parse(v)
}

fn is_provider_name(s: &str) -> bool {
    protocol_core::ids::is_id_grammar(s)
}

/// Deep-merges `over` into `base`: objects merge key by key, anything else replaces.
fn merge(base: &mut Map<String, Value>, over: &Map<String, Value>) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(Value::Object(b)), Value::Object(o)) => merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A project's `mcp.servers.<name>` replaces the global definition of that name whole (it
/// needs its own approval), rather than merging into it key by key.
fn replace_mcp_servers(merged: &mut Map<String, Value>, project: &Map<String, Value>) {
    let Some(Value::Object(over)) = project.get("mcp").and_then(|m| m.get("servers")) else {
        return;
    };
    if let Some(Value::Object(servers)) = merged.get_mut("mcp").and_then(|m| m.get_mut("servers")) {
        for (name, def) in over {
            servers.insert(name.clone(), def.clone());
        }
    }
}

/// Validates the shape of one settings object (global or project) on its own.
fn check_shape(m: &Map<String, Value>) -> R<()> {
    let top = Value::Object(m.clone());
    obj(&top, TOP_KEYS)?;
    Ok(())
}

/// The top-level settings keys (`backend.md`, `runner.md`, `code-mode.md`); any other is
/// `configuration_invalid` (and `magi-code doctor` names the nearest of these).
pub const TOP_KEYS: &[&str] = &[
    "provider",
    "model",
    "effort",
    "providers",
    "instructions",
    "runner",
    "mcp",
    "tools",
    "retention_days",
    "hooks",
    "agent",
    "agents",
    "skills",
    "code_mode",
    "shell_env",
];

/// Loads, validates and merges global and project settings.
pub fn load(
    global: Option<Map<String, Value>>,
    project: Option<Map<String, Value>>,
) -> R<Settings> {
    let global = global.unwrap_or_default();
    let project = project.unwrap_or_default();
    check_shape(&global)?;
    check_shape(&project)?;
    // Hooks run commands on every tool call: only the user's own settings may define them.
    if project.contains_key("hooks") {
        return Err(Invalid("hooks in project settings"));
    }
    // Each file must be valid on its own, so a typo in either surfaces; only the merge must
    // be complete, so a project can override one key of a globally configured provider.
    interpret(&global, false)?;
    interpret(&project, false)?;
    let mut merged = global.clone();
    merge(&mut merged, &project);
    replace_mcp_servers(&mut merged, &project);
    let mut s = interpret(&merged, true)?;
    // Only global settings can approve an MCP server definition.
    s.mcp_approved = match global.get("mcp").and_then(|m| m.get("approved")) {
        Some(v) => strings(v)?,
        None => Vec::new(),
    };
    Ok(s)
}

/// Checks one top-level `key` of one file as [`load`] reads that file on its own (`project`:
/// the project file), so `magi-code doctor` can name every bad key, not just the first.
///
/// # Errors
/// Why the key is invalid.
pub fn check_key(key: &str, value: &Value, project: bool) -> R<()> {
    let mut m = Map::new();
    m.insert(key.to_owned(), value.clone());
    check_shape(&m)?;
    if project && key == "hooks" {
        return Err(Invalid("hooks in project settings"));
    }
    interpret(&m, false).map(|_| ())
}

/// Reads one settings object; `whole` = the merged result, where a configured provider must
/// be complete (`kind` and `base_url`).
fn interpret(m: &Map<String, Value>, whole: bool) -> R<Settings> {
    let mut s = Settings::default();
    if let Some(v) = m.get("provider") {
        s.provider = string(v)?;
    }
    if let Some(v) = m.get("model") {
        s.model = string(v)?;
    }
    if s.provider.len() > protocol_core::limits::NAME_BYTES
        || s.model.len() > protocol_core::limits::NAME_BYTES
    {
        return Err(Invalid("name too long"));
    }
    if let Some(v) = m.get("effort") {
        s.effort = match v.as_str() {
            Some(e @ ("default" | "low" | "medium" | "high" | "xhigh" | "max")) => e.to_owned(),
            _ => return Err(Invalid("bad effort")),
        };
    }
    if let Some(v) = m.get("providers") {
        let p = v.as_object().ok_or(Invalid("providers"))?;
        for (name, cfg) in p {
            match name.as_str() {
                "catalog" => {
                    let c = obj(cfg, &["enabled"])?;
                    if let Some(e) = c.get("enabled") {
                        s.catalog_enabled = strings(e)?;
                        if !s.catalog_enabled.iter().all(|x| {
                            x.split_once('/')
                                .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())
                        }) {
                            return Err(Invalid("catalog entry"));
                        }
                    }
                }
                name if super::providers::is_offline(name) => {
                    let row = super::providers::SCRIPTED;
                    let c = obj(cfg, row.settings_keys())?;
                    if let Some(v) = c.get("script") {
                        s.scripted_script = Some(string(v)?);
                    }
                    if let Some(v) = c.get("startup_delay_ms") {
                        s.startup_delay_ms = v
                            .as_u64()
                            .filter(|d| *d <= MAX_STARTUP_DELAY_MS)
                            .ok_or(Invalid("startup_delay_ms"))?;
                    }
                }
                name if super::providers::is_agent_cli(name) => {
                    let row = super::providers::builtin(name).ok_or(Invalid("provider name"))?;
                    let c = obj(cfg, row.settings_keys())?;
                    if let Some(v) = c.get("command") {
                        let command = string(v)?;
                        if command.is_empty() {
                            return Err(Invalid("command"));
                        }
                        s.cli_commands.insert(name.to_owned(), command);
                    }
                }
                name if super::providers::builtin(name).is_some() => {
                    // No `wire_api` here: the built-ins' shapes are fixed (runner.md §1).
                    let row = super::providers::builtin(name).ok_or(Invalid("provider name"))?;
                    let c = obj(cfg, row.settings_keys())?;
                    s.codex_auth_url =
                        super::codex::auth_url(c)?.or_else(|| s.codex_auth_url.take());
                    if let Some(v) = c.get("base_url") {
                        s.builtin_base_urls.insert(name.to_owned(), string(v)?);
                    }
                    provider_window(&mut s, name, c)?;
                    if let Some(n) = max_output_tokens(c)? {
                        s.max_output_tokens.insert(name.to_owned(), n);
                    }
                }
                other => {
                    if !is_provider_name(other) {
                        return Err(Invalid("provider name"));
                    }
                    let c = obj(
                        cfg,
                        &[
                            "kind",
                            "base_url",
                            "api_key_env",
                            "wire_api",
                            "max_output_tokens",
                            "context_window",
                            "prompt_caching",
                        ],
                    )?;
                    provider_window(&mut s, other, c)?;
                    match c.get("kind") {
                        None if !whole => {}
                        Some(k) if k.as_str() == Some("openai-compatible") => {}
                        _ => return Err(Invalid("provider kind")),
                    }
                    let base_url = match c.get("base_url") {
                        Some(v) => string(v)?,
                        None if !whole => String::new(),
                        None => return Err(Invalid("base_url")),
                    };
                    let api_key_env = c.get("api_key_env").map(string).transpose()?;
                    let wire_api = match c.get("wire_api").map(Value::as_str) {
                        None | Some(Some("chat")) => WireApi::OpenAiChat,
                        Some(Some("responses")) => WireApi::OpenAiResponses,
                        Some(_) => return Err(Invalid("wire_api")),
                    };
                    if let Some(n) = max_output_tokens(c)? {
                        s.max_output_tokens.insert(other.to_owned(), n);
                    }
                    s.compat.insert(
                        other.to_owned(),
                        CompatProvider {
                            base_url,
                            api_key_env,
                            wire_api,
                        },
                    );
                }
            }
        }
        if s.compat.len() + super::providers::BUILTIN.len() > MAX_PROVIDERS {
            return Err(Invalid("too many providers"));
        }
    }
    if let Some(v) = m.get("runner") {
        let r = obj(v, &["max_steps", "context_window"])?;
        if let Some(v) = r.get("max_steps") {
            // Bounded by MAX_MAX_STEPS, so the narrowing cannot fail.
            s.max_steps = u32::try_from(int(v, 1, u64::from(MAX_MAX_STEPS), "max_steps")?)
                .map_err(|_| Invalid("max_steps"))?;
        }
        if let Some(v) = r.get("context_window") {
            s.context_window = int(v, MIN_CONTEXT_WINDOW, MAX_CONTEXT_WINDOW, "context_window")?;
        }
    }
    if let Some(v) = m.get("instructions") {
        s.instructions = strings(v)?;
        if s.instructions.len() > MAX_INSTRUCTION_PATHS {
            return Err(Invalid("too many instructions"));
        }
    }
    if let Some(v) = m.get("mcp") {
        let c = obj(v, &["servers", "approved"])?;
        if let Some(servers) = c.get("servers") {
            s.mcp_servers = super::mcp_servers::parse(servers)?;
        }
        if let Some(a) = c.get("approved") {
            s.mcp_approved = strings(a)?;
        }
    }
    if let Some(v) = m.get("tools") {
        let t = obj(
            v,
            &["shell", "write", "read", "client", "mcp", "task", "code"],
        )?;
        if let Some(p) = t.get("read") {
            s.tool_read = policy(p)?;
        }
        if let Some(p) = t.get("write") {
            s.tool_write = policy(p)?;
        }
        if let Some(p) = t.get("shell") {
            s.tool_shell = policy(p)?;
        }
        if let Some(p) = t.get("client") {
            s.tool_client = policy(p)?;
        }
        if let Some(p) = t.get("mcp") {
            s.tool_mcp = policy(p)?;
        }
        if let Some(p) = t.get("task") {
            s.tool_task = policy(p)?;
        }
        if let Some(p) = t.get("code") {
            s.tool_code = policy(p)?;
        }
    }
    if let Some(v) = m.get("hooks") {
        s.hooks = super::hooks::Hooks::parse(v)?;
    }
    if let Some(v) = m.get("code_mode") {
        s.code_mode = CodeMode::parse(v, whole)?;
    }
    if let Some(v) = m.get("shell_env") {
        s.shell_env_keep = super::shell_env::parse(v)?;
    }
    // `agent`, `agents` and `skills` (runner.md §7): profile and skill names.
    if let Some(v) = m.get("agent") {
        s.agent = Some(super::profiles::id_name(v)?);
    }
    if let Some(v) = m.get("agents") {
        s.agents_disabled = super::profiles::disabled(v)?;
    }
    if let Some(v) = m.get("skills") {
        s.skills_disabled = super::profiles::disabled(v)?;
    }
    if let Some(v) = m.get("retention_days") {
        s.retention_days = v
            .as_u64()
            .filter(|d| *d <= 36_500)
            .ok_or(Invalid("retention_days"))?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(v: Value) -> Option<Map<String, Value>> {
        v.as_object().cloned()
    }

    #[test]
    fn defaults() {
        let s = load(None, None).unwrap();
        assert_eq!(
            (s.provider.as_str(), s.model.as_str()),
            ("scripted", "echo")
        );
    }

    #[test]
    fn project_wins_except_approval() {
        let g = m(
            json!({"model":"script","providers":{"scripted":{"script":"/a"}},"mcp":{"approved":["x"]}}),
        );
        let p = m(
            json!({"model":"echo","providers":{"scripted":{"startup_delay_ms":5}},"mcp":{"approved":["y"]}}),
        );
        let s = load(g, p).unwrap();
        assert_eq!(s.model, "echo");
        assert_eq!(s.scripted_script.as_deref(), Some("/a"));
        assert_eq!(s.startup_delay_ms, 5);
        assert_eq!(s.mcp_approved, vec!["x".to_string()]);
    }

    #[test]
    fn a_project_mcp_server_replaces_the_global_one_whole_and_tools_mcp_is_a_policy() {
        let g = m(json!({"mcp":{"servers":{
            "fs":{"command":"node","args":["a"],"env":{"K":"v"},"enabled":true},
            "other":{"command":"x"}}}}));
        let p = m(json!({"mcp":{"servers":{"fs":{"command":"deno"}}},"tools":{"mcp":"allow"}}));
        let s = load(g, p).unwrap();
        // Not merged key by key: the global args, env and enabled are gone.
        assert_eq!(
            s.mcp_servers["fs"].canonical,
            r#"{"command":"deno","name":"fs"}"#
        );
        assert!(!s.mcp_servers["fs"].enabled);
        assert_eq!(
            s.mcp_servers["other"].canonical,
            r#"{"command":"x","name":"other"}"#
        );
        assert_eq!(s.tool_mcp, Policy::Allow);
        assert_eq!(load(None, None).unwrap().tool_mcp, Policy::Ask);
        assert!(load(m(json!({"tools":{"mcp":"sometimes"}})), None).is_err());
    }

    #[test]
    fn rejections() {
        assert!(load(m(json!({"modle":"x"})), None).is_err());
        assert!(load(None, m(json!({"effort":"huge"}))).is_err());
        assert!(load(
            m(json!({"providers":{"scripted":{"startup_delay_ms":10001}}})),
            None
        )
        .is_err());
        assert!(load(
            m(json!({"providers":{"scripted":{"startup_delay_ms":10000}}})),
            None
        )
        .is_ok());
        assert!(load(m(json!({"tools":{"shell":"maybe"}})), None).is_err());
        assert!(load(m(json!({"tools":{"client":"maybe"}})), None).is_err());
        assert_eq!(Settings::default().tool_client, Policy::Allow);
        let ask = load(m(json!({"tools":{"client":"ask"}})), None).unwrap();
        assert_eq!(ask.tool_client, Policy::Ask);
        assert!(load(
            m(json!({"providers":{"x":{"kind":"other","base_url":"u"}}})),
            None
        )
        .is_err());
        assert!(load(m(json!({"retention_days":-1})), None).is_err());
        let many: Map<String, Value> = (0..28)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"kind":"openai-compatible","base_url":"http://127.0.0.1/v1"}),
                )
            })
            .collect();
        assert!(load(m(json!({"providers": many})), None).is_err());
        // Five built-ins and 27 configured: 32 in all (`backend.md` "Providers").
        let ok: Map<String, Value> = (0..27)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"kind":"openai-compatible","base_url":"http://127.0.0.1/v1"}),
                )
            })
            .collect();
        assert!(load(m(json!({"providers": ok})), None).is_ok());
    }

    fn one(v: Value) -> Result<Settings, Invalid> {
        load(m(v), None)
    }

    fn compat(extra: Value) -> Value {
        let mut c = json!({"kind":"openai-compatible","base_url":"http://127.0.0.1/v1"});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        json!({"providers": {"local": c}})
    }

    #[test]
    fn runner_defaults() {
        let s = load(None, None).unwrap();
        assert_eq!(s, Settings::default());
        assert_eq!((s.max_steps, s.context_window), (200, 200_000));
        assert_eq!(s.max_output_tokens_of("anthropic"), 16_384);
        assert_eq!(s.max_output_tokens_of("openai"), 16_384);
        assert!(s.instructions.is_empty());
        let s = one(json!({"runner": {}})).unwrap();
        assert_eq!((s.max_steps, s.context_window), (200, 200_000));
    }

    #[test]
    fn max_steps_bounds() {
        let steps = |n: Value| one(json!({"runner": {"max_steps": n}})).map(|s| s.max_steps);
        assert_eq!(steps(json!(1)), Ok(1));
        assert_eq!(steps(json!(1000)), Ok(1000));
        for bad in [
            json!(0),
            json!(1001),
            json!(-1),
            json!(5.0),
            json!("5"),
            json!(null),
        ] {
            assert!(steps(bad.clone()).is_err(), "max_steps {bad} accepted");
        }
    }

    #[test]
    fn context_window_bounds() {
        let w = |n: Value| one(json!({"runner": {"context_window": n}})).map(|s| s.context_window);
        assert_eq!(w(json!(1_000)), Ok(1_000));
        assert_eq!(w(json!(10_000_000)), Ok(10_000_000));
        for bad in [json!(999), json!(10_000_001), json!(0), json!(true)] {
            assert!(w(bad.clone()).is_err(), "context_window {bad} accepted");
        }
    }

    #[test]
    fn prompt_caching_is_a_boolean_per_provider() {
        let s = one(json!({"providers": {"anthropic": {"prompt_caching": false}}})).unwrap();
        assert!(s.no_prompt_caching.contains("anthropic"));
        let s = one(compat(json!({"prompt_caching": false}))).unwrap();
        assert!(s.no_prompt_caching.contains("local"));
        let s = one(compat(json!({"prompt_caching": true}))).unwrap();
        assert!(s.no_prompt_caching.is_empty());
        for bad in [json!("false"), json!(0), Value::Null] {
            assert!(
                one(json!({"providers": {"openai": {"prompt_caching": bad.clone()}}})).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_provider_context_window_has_the_runner_bounds_and_wins_over_it() {
        for name in ["anthropic", "openai"] {
            let w = |n: Value| {
                one(json!({"providers": {name: {"context_window": n}}, "runner": {"context_window": 50_000}}))
                    .map(|s| s.context_window_of(name))
            };
            assert_eq!(w(json!(1_000)), Ok(1_000));
            assert_eq!(w(json!(10_000_000)), Ok(10_000_000));
            for bad in [json!(999), json!(10_000_001), json!("2048")] {
                assert!(w(bad.clone()).is_err(), "context_window {bad} accepted");
            }
        }
        let s = one(compat(json!({"context_window": 2_048}))).unwrap();
        assert_eq!(s.context_window_of("local"), 2_048);
        assert_eq!(s.context_window_of("openai"), DEFAULT_CONTEXT_WINDOW);
        assert!(one(compat(json!({"context_window": 999}))).is_err());
        assert!(one(json!({"providers": {"scripted": {"context_window": 2_048}}})).is_err());
    }

    #[test]
    fn runner_rejects_unknown_keys_and_non_objects() {
        assert!(one(json!({"runner": {"max_step": 5}})).is_err());
        assert!(one(json!({"runner": [200]})).is_err());
        assert!(load(None, m(json!({"runner": {"context": 5000}}))).is_err());
    }

    #[test]
    fn max_output_tokens_bounds_per_provider() {
        for name in ["anthropic", "openai"] {
            let t = |n: Value| {
                one(json!({"providers": {name: {"max_output_tokens": n}}}))
                    .map(|s| s.max_output_tokens_of(name))
            };
            assert_eq!(t(json!(1)), Ok(1));
            assert_eq!(t(json!(1_000_000)), Ok(1_000_000));
            assert!(t(json!(0)).is_err());
            assert!(t(json!(1_000_001)).is_err());
            assert!(t(json!("16384")).is_err());
        }
        let t = |n: Value| {
            one(compat(json!({"max_output_tokens": n}))).map(|s| s.max_output_tokens_of("local"))
        };
        assert_eq!(t(json!(1)), Ok(1));
        assert_eq!(t(json!(1_000_000)), Ok(1_000_000));
        assert!(t(json!(0)).is_err());
        assert!(t(json!(1_000_001)).is_err());
        assert_eq!(
            one(compat(json!({})))
                .unwrap()
                .max_output_tokens_of("local"),
            16_384
        );
        // Only the HTTP providers take it.
        assert!(one(json!({"providers": {"scripted": {"max_output_tokens": 5}}})).is_err());
    }

    #[test]
    fn wire_api_only_on_configured_providers() {
        let w = |v: Value| one(compat(json!({"wire_api": v}))).map(|s| s.compat["local"].wire_api);
        assert_eq!(w(json!("chat")), Ok(WireApi::OpenAiChat));
        assert_eq!(w(json!("responses")), Ok(WireApi::OpenAiResponses));
        assert!(w(json!("completions")).is_err());
        assert!(w(json!(1)).is_err());
        assert_eq!(
            one(compat(json!({}))).unwrap().compat["local"].wire_api,
            WireApi::OpenAiChat
        );
        for name in ["anthropic", "openai", "scripted"] {
            let v = json!({"providers": {name: {"wire_api": "responses"}}});
            assert!(one(v).is_err(), "wire_api on {name} accepted");
        }
    }

    #[test]
    fn project_overrides_runner_and_provider_keys_one_by_one() {
        let mut g = compat(json!({"wire_api": "responses", "max_output_tokens": 100}));
        g["runner"] = json!({"max_steps": 10, "context_window": 5_000});
        g["providers"]["openai"] = json!({"max_output_tokens": 7});
        let p = json!({
            "runner": {"max_steps": 20},
            "providers": {"local": {"max_output_tokens": 200}, "anthropic": {"max_output_tokens": 9}}
        });
        let s = load(m(g), m(p)).unwrap();
        assert_eq!((s.max_steps, s.context_window), (20, 5_000));
        let local = &s.compat["local"];
        assert_eq!(local.base_url, "http://127.0.0.1/v1");
        assert_eq!(local.wire_api, WireApi::OpenAiResponses);
        assert_eq!(s.max_output_tokens_of("local"), 200);
        assert_eq!(s.max_output_tokens_of("openai"), 7);
        assert_eq!(s.max_output_tokens_of("anthropic"), 9);
        // A partial provider with nothing to complete it is still incomplete.
        let lone = json!({"providers": {"other": {"max_output_tokens": 5}}});
        assert!(load(None, m(lone.clone())).is_err());
        assert!(load(m(lone), None).is_err());
        // And a wrong kind is wrong in either file.
        let wrong = json!({"providers": {"local": {"kind": "ollama"}}});
        assert!(load(m(compat(json!({}))), m(wrong)).is_err());
    }

    #[test]
    fn instructions_paths_bound() {
        let paths = |n: usize| json!({"instructions": vec!["a.md"; n]});
        assert_eq!(
            one(paths(MAX_INSTRUCTION_PATHS))
                .unwrap()
                .instructions
                .len(),
            64
        );
        assert!(one(paths(MAX_INSTRUCTION_PATHS + 1)).is_err());
        assert!(one(json!({"instructions": "a.md"})).is_err());
        assert!(one(json!({"instructions": [""]})).is_err());
        let s = load(
            m(json!({"instructions": ["g.md"]})),
            m(json!({"instructions": ["p.md"]})),
        );
        assert_eq!(s.unwrap().instructions, vec!["p.md".to_owned()]);
    }

    #[test]
    fn hooks_come_from_global_settings_only() {
        let g = m(json!({"hooks": {"pre_tool": [{"command": "true", "tools": ["shell"]}]}}));
        let s = load(g.clone(), m(json!({"model": "echo"}))).unwrap();
        assert_eq!(s.hooks.pre_tool[0].command, "true");
        assert!(load(g, m(json!({"hooks": {}}))).is_err());
        assert!(load(None, m(json!({"hooks": {"pre_tool": []}}))).is_err());
        assert!(one(json!({"hooks": {"pre_tool": [{"command": "x", "on": 1}]}})).is_err());
    }

    #[test]
    fn a_fifo_in_place_of_settings_is_invalid_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("settings.json");
        let ok = std::process::Command::new("mkfifo").arg(&p).status();
        assert!(ok.unwrap().success(), "mkfifo failed");
        assert_eq!(read_file(&p), Err(Invalid("not a file")));
    }

    #[test]
    fn agent_and_disabled_lists_parse_and_merge() {
        let g = m(
            json!({"agent": "reviewer", "agents": {"disabled": ["a"]}, "skills": {"disabled": ["x", "y.z"]}}),
        );
        let p = m(json!({"agent": "planner", "skills": {"disabled": []}}));
        let s = load(g.clone(), p).unwrap();
        assert_eq!(s.agent.as_deref(), Some("planner"));
        assert_eq!(s.agents_disabled, vec!["a".to_string()]);
        assert!(
            s.skills_disabled.is_empty(),
            "the project's list replaces the global one"
        );
        let s = load(g, None).unwrap();
        assert_eq!(s.skills_disabled, vec!["x".to_string(), "y.z".to_string()]);
        let s = load(None, None).unwrap();
        assert_eq!((s.agent, s.agents_disabled.len()), (None, 0));
    }

    #[test]
    fn agent_and_disabled_lists_are_strict() {
        let long = "a".repeat(65);
        let bad = [
            json!({"agent": 5}),
            json!({"agent": ""}),
            json!({"agent": "has space"}),
            json!({"agent": long}),
            json!({"agents": ["a"]}),
            json!({"agents": {"disabled": "a"}}),
            json!({"agents": {"disabled": [1]}}),
            json!({"agents": {"disabled": ["a/b"]}}),
            json!({"agents": {"enabled": []}}),
            json!({"skills": {"disabled": [null]}}),
            json!({"skills": {"off": []}}),
            json!({"skills": true}),
        ];
        for v in bad {
            assert!(load(m(v.clone()), None).is_err(), "global {v}");
            assert!(load(None, m(v.clone())).is_err(), "project {v}");
        }
        assert!(load(m(json!({"agent": "a".repeat(64)})), None).is_ok());
    }

    #[test]
    fn disabled_lists_bound_edge() {
        let names = |n: usize| (0..n).map(|i| format!("n{i}")).collect::<Vec<_>>();
        for key in ["agents", "skills"] {
            let ok = load(
                m(json!({key: {"disabled": names(crate::config::profiles::MAX_DISABLED_NAMES)}})),
                None,
            )
            .unwrap();
            let got = if key == "agents" {
                ok.agents_disabled
            } else {
                ok.skills_disabled
            };
            assert_eq!(
                got.len(),
                crate::config::profiles::MAX_DISABLED_NAMES,
                "{key}"
            );
            let over = load(
                None,
                m(
                    json!({key: {"disabled": names(crate::config::profiles::MAX_DISABLED_NAMES + 1)}}),
                ),
            );
            assert!(over.is_err(), "{key}");
        }
    }
}

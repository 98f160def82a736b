//! The MCP servers and children `initialize` admits: the approved enabled definitions, and
//! the secrets rule every child (tools, hooks, servers, the Code Mode helper) gets from the
//! settings. `doctor` reads them the same way.

use crate::config::Settings;
use crate::mcp::{self, Definition};
use std::path::Path;

/// Each enabled server by name with its definition, `None` when its digest is not approved
/// in global settings (the settings loader drops project approvals, decision 34).
pub fn enabled_servers<'s>(
    settings: &'s Settings,
    root: &Path,
) -> Vec<(&'s str, Option<Definition>)> {
    settings
        .mcp_servers
        .iter()
        .filter(|(_, s)| s.enabled)
        .map(|(name, s)| {
            let approved = settings.mcp_approved.contains(&mcp::digest(&s.canonical));
            let def = approved
                .then(|| Definition::from_canonical(&s.canonical))
                .flatten()
                .map(|mut def| {
                    if let Definition::Http(d) = &mut def {
                        d.token_home = Some(root.to_path_buf());
                    }
                    def
                });
            (name.as_str(), def)
        })
        .collect()
}

/// The enabled servers' definitions; `None` if one is not approved.
pub fn approved_servers(settings: &Settings, root: &Path) -> Option<Vec<Definition>> {
    enabled_servers(settings, root)
        .into_iter()
        .map(|(_, d)| d)
        .collect()
}

/// The variables no server inherits: the secrets rule's (`util::env::withheld_names`).
pub fn hidden_vars() -> Vec<String> {
    crate::util::env::withheld_names()
}

/// Sets the secrets rule of every child from `settings`: the configured providers' key
/// variables, the variables MCP servers read tokens from (`bearer_token_env`, `env_headers`:
/// token variables, `decisions.md` 54) and `shell_env.keep`. Every secret-named value of the
/// backend's own environment, and each of those variables' values, becomes a loaded value for
/// redaction.
pub fn set_children_rule(settings: &Settings) {
    let mut keys: Vec<String> = settings
        .compat
        .values()
        .filter_map(|c| c.api_key_env.clone())
        .collect();
    keys.extend(mcp_token_vars(settings));
    for name in &keys {
        if let Some(v) = std::env::var_os(name) {
            crate::util::redact::register_secret(&v.to_string_lossy());
        }
    }
    crate::util::env::register_secret_values();
    crate::util::env::set_rule(keys, settings.shell_env_keep.clone());
}

/// The variables the configured MCP servers read tokens and headers from.
fn mcp_token_vars(settings: &Settings) -> Vec<String> {
    let mut names = Vec::new();
    for s in settings.mcp_servers.values() {
        let Ok(serde_json::Value::Object(def)) = serde_json::from_str(&s.canonical) else {
            continue;
        };
        if let Some(v) = def
            .get("bearer_token_env")
            .and_then(serde_json::Value::as_str)
        {
            names.push(v.to_owned());
        }
        if let Some(h) = def
            .get("env_headers")
            .and_then(serde_json::Value::as_object)
        {
            names.extend(h.values().filter_map(|v| v.as_str().map(str::to_owned)));
        }
    }
    names
}

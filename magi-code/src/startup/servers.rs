//! The MCP servers and children `initialize` admits: the approved enabled definitions, and
//! the secrets rule every child (tools, hooks, servers, the Code Mode helper) gets from the
//! settings. `doctor` reads them the same way.

use crate::config::Settings;
use crate::mcp::{self, Definition};
use std::path::Path;

/// The enabled servers' definitions, each approved by its digest in global settings (the
/// settings loader drops project approvals, decision 34); Err if one is not.
pub fn approved_servers(settings: &Settings, root: &Path) -> Result<Vec<Definition>, ()> {
    settings
        .mcp_servers
        .values()
        .filter(|s| s.enabled)
        .map(|s| {
            let approved = settings.mcp_approved.contains(&mcp::digest(&s.canonical));
            let mut def = approved
                .then(|| Definition::from_canonical(&s.canonical))
                .flatten()
                .ok_or(())?;
            if let Definition::Http(d) = &mut def {
                d.token_home = Some(root.to_path_buf());
            }
            Ok(def)
        })
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

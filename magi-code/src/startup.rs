//! The initialization worker: storage root, runtime folders, settings, provider readiness,
//! MCP admission and the context identity. Runs off the protocol loop, cancellably.

use crate::cancel::Cancel;

use crate::settings::{self, Settings};
use protocol_core::ErrorCode;

use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the process environment says, captured at launch so tests can inject it.
#[derive(Debug, Clone, Default)]
pub struct LaunchEnv {
    /// `MC_HOME`.
    pub mc_home: Option<OsString>,
    /// `HOME`.
    pub home: Option<OsString>,
    /// The working directory the client chose.
    pub cwd: Option<PathBuf>,
}

impl LaunchEnv {
    /// Reads the real environment.
    #[must_use]
    pub fn from_process() -> Self {
        Self {
            mc_home: std::env::var_os("MC_HOME").filter(|v| !v.is_empty()),
            home: std::env::var_os("HOME").filter(|v| !v.is_empty()),
            cwd: std::env::current_dir().ok(),
        }
    }
}

/// The admitted runtime of one child: one snapshot of configuration.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// Canonical storage root.
    pub root: PathBuf,
    /// Canonical working directory.
    pub cwd: PathBuf,
    /// Merged settings.
    pub settings: Settings,
    /// Context identity (64 lowercase hex).
    pub context_id: String,
}

/// A startup failure with what was known before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The safe startup code.
    pub code: ErrorCode,
    /// Context identity if computed.
    pub context_id: Option<String>,
}

fn fail(code: ErrorCode) -> Failure {
    Failure {
        code,
        context_id: None,
    }
}

/// Resolves `MC_HOME` (default `$HOME/.magi-code`), relative to the cwd if relative.
pub fn storage_root(env: &LaunchEnv, cwd: &Path) -> Option<PathBuf> {
    let p = match (&env.mc_home, &env.home) {
        (Some(m), _) => PathBuf::from(m),
        (None, Some(h)) => PathBuf::from(h).join(".magi-code"),
        (None, None) => return None,
    };
    Some(if p.is_absolute() { p } else { cwd.join(p) })
}

/// Creates the runtime folders that are missing, owner-only.
pub fn create_dirs(root: &Path) -> std::io::Result<()> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true).mode(0o700);
    for d in [
        root.to_path_buf(),
        root.join("sessions"),
        root.join("cache").join("models"),
    ] {
        let existed = d.is_dir();
        b.create(&d)?;
        if !existed {
            fs::set_permissions(&d, fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

/// SHA-256 of the canonical cwd and canonical storage root, as 64 lowercase hex characters.
#[must_use]
pub fn context_id(cwd: &Path, root: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut h = Sha256::new();
    h.update(b"magi-code.context.v1\0");
    h.update(cwd.as_os_str().as_bytes());
    h.update(b"\0");
    h.update(root.as_os_str().as_bytes());
    hex(&h.finalize())
}

/// Lowercase hex.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

/// The approval digest of a canonical MCP server definition.
#[must_use]
pub fn mcp_digest(canonical: &str) -> String {
    hex(&Sha256::digest(canonical.as_bytes()))
}

/// A fresh opaque revision.
#[must_use]
pub fn fresh_revision() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Runs initialization. `capabilities` are the negotiated names.
pub fn run(env: &LaunchEnv, cancel: &Cancel, _capabilities: &[String]) -> Result<Runtime, Failure> {
    let cwd = env
        .cwd
        .as_ref()
        .ok_or_else(|| fail(ErrorCode::StartupFailed))?;
    let cwd = fs::canonicalize(cwd).map_err(|_| fail(ErrorCode::StartupFailed))?;
    let root = storage_root(env, &cwd).ok_or_else(|| fail(ErrorCode::StartupFailed))?;
    create_dirs(&root).map_err(|_| fail(ErrorCode::StartupFailed))?;
    let root = fs::canonicalize(&root).map_err(|_| fail(ErrorCode::StartupFailed))?;
    let context_id = context_id(&cwd, &root);
    let failed = |code| Failure {
        code,
        context_id: Some(context_id.clone()),
    };

    let global = settings::read_file(&root.join("settings.json"))
        .map_err(|_| failed(ErrorCode::ConfigurationInvalid))?;
    let project = settings::read_file(&cwd.join(".magi").join("settings.json"))
        .map_err(|_| failed(ErrorCode::ConfigurationInvalid))?;
    let settings =
        settings::load(global, project).map_err(|_| failed(ErrorCode::ConfigurationInvalid))?;

    if settings.startup_delay_ms > 0
        && !cancel.sleep(Duration::from_millis(settings.startup_delay_ms))
    {
        return Err(failed(ErrorCode::StartupCancelled));
    }
    if cancel.is_cancelled() {
        return Err(failed(ErrorCode::StartupCancelled));
    }

    // MCP: an enabled server needs a global approval of its canonical definition
    // (`mcp_digest`). Connecting to approved servers is not built yet, so any enabled server
    // fails startup honestly rather than being skipped.
    if settings.mcp_servers.values().any(|s| s.enabled) {
        return Err(failed(ErrorCode::McpUnavailable));
    }

    if !provider_ready(&settings, &root) {
        return Err(failed(ErrorCode::ProviderUnavailable));
    }

    Ok(Runtime {
        root,
        cwd,
        settings,
        context_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_id_is_hex_and_alias_stable() {
        let a = context_id(Path::new("/w"), Path::new("/h"));
        assert_eq!(a.len(), 64);
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_ne!(a, context_id(Path::new("/w2"), Path::new("/h")));
        assert_ne!(a, context_id(Path::new("/w"), Path::new("/h2")));
    }
}

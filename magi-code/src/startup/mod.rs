//! The initialization worker: storage root, runtime folders, settings, instructions, provider
//! readiness, MCP admission and the context identity. Runs off the protocol loop, cancellably.

pub mod env;

pub use env::{context_id, create_dirs, storage_root, LaunchEnv};

use crate::config::{instructions, settings};
use crate::providers::provider_ready;
use crate::runtime::Runtime;
use crate::util::cancel::Cancel;
use protocol_core::{ClientToolDef, ErrorCode};
use std::fs;
use std::time::Duration;

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

/// Runs initialization. `capabilities` are the negotiated names; `client_tools` the validated
/// `client.tools` definitions, kept for the child's life.
pub fn run(
    env: &LaunchEnv,
    cancel: &Cancel,
    capabilities: &[String],
    client_tools: &[ClientToolDef],
) -> Result<Runtime, Failure> {
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
    // Read once here, part of the admitted snapshot (runner.md §3).
    let instructions = instructions::load(&root, &cwd, &settings.instructions)
        .map_err(|_| failed(ErrorCode::ConfigurationInvalid))?;

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
        instructions,
        client_tools: client_tools.to_vec(),
        tool_cards: capabilities.iter().any(|c| c == "tool.cards"),
    })
}

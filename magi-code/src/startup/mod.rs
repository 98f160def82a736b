//! The initialization worker: storage root, runtime folders, settings, instructions, provider
//! readiness, MCP admission and the context identity. Runs off the protocol loop, cancellably.

pub mod doctor;
pub mod env;
pub mod servers;

pub use env::{context_id, create_dirs, storage_root, LaunchEnv};

use crate::config::{instructions, profiles, settings, skills, Settings};
use crate::mcp::{McpHub, StartError};
use crate::providers::provider_ready;
use crate::runtime::Runtime;
use crate::util::cancel::Cancel;
use protocol_core::{ClientToolDef, ErrorCode};
use servers::{approved_servers, hidden_vars, set_children_rule};
use std::fs;
use std::path::Path;
use std::time::Duration;

/// A startup failure with what was known before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The safe startup code.
    pub code: ErrorCode,
    /// Context identity if computed.
    pub context_id: Option<String>,
    /// The selected provider, once the settings were admitted.
    pub provider: Option<String>,
    /// The selected model, once the settings were admitted.
    pub model: Option<String>,
}

fn fail(code: ErrorCode) -> Failure {
    Failure {
        code,
        context_id: None,
        provider: None,
        model: None,
    }
}

/// What initialization admitted: the runtime and the connected MCP servers (kept apart
/// because `runtime.rs` sits below `mcp/` in the import direction).
#[derive(Debug)]
pub struct Admitted {
    /// The runtime snapshot.
    pub runtime: Runtime,
    /// The connected servers, None when none is enabled.
    pub mcp: Option<McpHub>,
}

/// Starts the approved enabled servers (all at once), None when none is enabled.
fn start_mcp(
    settings: &Settings,
    root: &Path,
    cwd: &Path,
    cancel: &Cancel,
) -> Result<Option<McpHub>, ErrorCode> {
    let defs = approved_servers(settings, root).ok_or(ErrorCode::McpUnavailable)?;
    if defs.is_empty() {
        return Ok(None);
    }
    match McpHub::start_all(&defs, cwd, &hidden_vars(), cancel) {
        Ok(hub) => Ok(Some(hub)),
        Err(StartError::Cancelled) => Err(ErrorCode::StartupCancelled),
        Err(StartError::Unavailable) => Err(ErrorCode::McpUnavailable),
    }
}

/// Runs initialization. `capabilities` are the negotiated names; `client_tools` the validated
/// `client.tools` definitions, kept for the child's life.
pub fn run(
    env: &LaunchEnv,
    cancel: &Cancel,
    capabilities: &[String],
    client_tools: &[ClientToolDef],
) -> Result<Admitted, Failure> {
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
        provider: None,
        model: None,
    };

    let global = settings::read_file(&root.join("settings.json"))
        .map_err(|_| failed(ErrorCode::ConfigurationInvalid))?;
    let project = settings::read_file(&cwd.join(".magi").join("settings.json"))
        .map_err(|_| failed(ErrorCode::ConfigurationInvalid))?;
    let settings =
        settings::load(global, project).map_err(|_| failed(ErrorCode::ConfigurationInvalid))?;
    crate::providers::target::load_keys(&settings, &root);
    set_children_rule(&settings);
    // From here on a failed startup's `status` shows the selection it had (the protocol:
    // "selection/context may be available").
    let failed = |code| Failure {
        provider: Some(settings.provider.clone()),
        model: Some(settings.model.clone()),
        ..failed(code)
    };
    // Read once here, part of the admitted snapshot (runner.md §3).
    let instructions = instructions::load(&root, &cwd, &settings.instructions)
        .map_err(|_| failed(ErrorCode::ConfigurationInvalid))?;
    // After every configuration check, so a bad settings file is reported first.
    let profiles = profiles::load(&root, &cwd, settings.agent.as_deref())
        .map_err(|_| failed(ErrorCode::ProfileInvalid))?;
    let skills = skills::load(&root, &cwd, &settings.skills_disabled);

    if settings.startup_delay_ms > 0
        && !cancel.sleep(Duration::from_millis(settings.startup_delay_ms))
    {
        return Err(failed(ErrorCode::StartupCancelled));
    }
    if cancel.is_cancelled() {
        return Err(failed(ErrorCode::StartupCancelled));
    }

    if !provider_ready(&settings, &root) {
        return Err(failed(ErrorCode::ProviderUnavailable));
    }
    // Last, so nothing after it can fail and leave servers running.
    let mcp = start_mcp(&settings, &root, &cwd, cancel).map_err(failed)?;

    Ok(Admitted {
        runtime: Runtime {
            root,
            cwd,
            settings,
            context_id,
            instructions,
            client_tools: client_tools.to_vec(),
            tool_cards: capabilities.iter().any(|c| c == "tool.cards"),
            tool_details: capabilities.iter().any(|c| c == "tool.details"),
            profiles,
            skills,
        },
        mcp,
    })
}

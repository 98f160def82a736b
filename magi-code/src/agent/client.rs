//! Which model client a run (a turn or a subagent) talks to, and how its model takes effort.

use super::params::LoopParams;
use crate::config::providers;
use crate::history::ToolSpec;
use crate::providers::claude::ClaudeModel;
use crate::providers::claude_proc::CliSlot;
use crate::providers::model::Thinking;
use crate::providers::{load_script, HttpModel, ModelClient, ScriptedModel};
use crate::runtime::Runtime;
use crate::session::Selection;
use protocol_core::ErrorCode;

/// The client of `provider`/`model` for a run whose input is `prompt`. `scripted/script` plays
/// turn `turn` of the script (taken modulo its length); with no turn (a subagent) it echoes
/// the prompt like `scripted/echo`, since a script's turns belong to the primary conversation.
/// Its steps belong to session `session_id`; an agent CLI provider keeps its process in `cli`
/// (the session's slot; none for a subagent).
pub fn client(
    rt: &Runtime,
    (provider, model): (&str, &str),
    prompt: &str,
    turn: Option<usize>,
    (session_id, cli): (&str, Option<CliSlot>),
) -> Result<Box<dyn ModelClient>, ErrorCode> {
    if providers::is_agent_cli(provider) {
        // The transcript a new CLI conversation may start from fits the model's real window.
        let window = crate::catalog::cache::context_window(rt, provider, model);
        let max_output = rt.settings.max_output_tokens_of(provider);
        let budget = crate::run::compaction::summary_budget(window, max_output);
        let launch = crate::providers::target::cli_launch(&rt.settings, provider, &rt.cwd, budget)
            .ok_or(ErrorCode::ProviderUnavailable)?;
        return Ok(Box::new(ClaudeModel::new(launch, cli)));
    }
    if !providers::is_offline(provider) {
        return match crate::providers::target(rt, provider, model) {
            Some(t) => Ok(Box::new(HttpModel::new(t).in_session(session_id))),
            None => Err(ErrorCode::ProviderUnavailable),
        };
    }
    Ok(match (model, turn) {
        (providers::ECHO, _) | (providers::SCRIPT, None) => Box::new(ScriptedModel::echo(prompt)),
        (providers::SCRIPT, Some(turn)) => {
            let script = rt
                .settings
                .scripted_script
                .as_deref()
                .and_then(load_script)
                .ok_or(ErrorCode::ExecutionFailed)?;
            Box::new(ScriptedModel::script(script[turn % script.len()].clone()))
        }
        _ => return Err(ErrorCode::ProviderUnavailable),
    })
}

/// The context window compaction works against: the catalog's, else the provider's
/// `context_window`, else `runner.context_window`;
/// unbounded for the scripted provider, which reads no conversation, and for an agent CLI,
/// which compacts its own conversation.
#[must_use]
pub fn context_window(rt: &Runtime, provider: &str, model: &str) -> u64 {
    if providers::is_offline(provider) || providers::is_agent_cli(provider) {
        u64::MAX
    } else {
        crate::catalog::cache::context_window(rt, provider, model)
    }
}

/// How `provider`/`model` takes an explicit effort: only the Anthropic Messages API has two
/// ways, and the model's catalog entry says which (one bounded read).
#[must_use]
pub fn thinking(rt: &Runtime, provider: &str, model: &str, effort: Option<&str>) -> Thinking {
    let anthropic = providers::builtin(provider).and_then(|r| r.wire())
        == Some(providers::WireApi::AnthropicMessages);
    if anthropic && effort.is_some() {
        crate::catalog::cache::thinking(rt, provider, model)
    } else {
        Thinking::Adaptive
    }
}

/// The loop parameters of a run (a turn or a subagent) on `sel`, whose effective effort is
/// `effort`, with these instructions and tools.
#[must_use]
pub fn loop_params<'a>(
    rt: &Runtime,
    sel: &'a Selection,
    effort: Option<&'a str>,
    instructions: &'a str,
    tools: &'a [ToolSpec],
) -> LoopParams<'a> {
    LoopParams {
        provider: &sel.provider,
        model: &sel.model,
        instructions,
        tools,
        effort,
        thinking: thinking(rt, &sel.provider, &sel.model, effort),
        max_output_tokens: rt.settings.max_output_tokens_of(&sel.provider),
        max_steps: rt.settings.max_steps,
        context_window: context_window(rt, &sel.provider, &sel.model),
    }
}

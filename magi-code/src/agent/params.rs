//! What a run is started with: what its requests send besides the conversation, and the run
//! machine's configuration from the worker's runtime.

use super::emit::RunOutput;
use crate::history::compact::Snapshot;
use crate::history::ToolSpec;
use crate::providers::model::Thinking;
use crate::run::compaction::fixed_bytes;
use crate::run::{CodeConfig, Config, Policies};
use crate::tools::ToolKind;

/// What a turn sends besides the conversation.
#[derive(Debug, Clone, Copy)]
pub struct LoopParams<'a> {
    /// The provider (settings name).
    pub provider: &'a str,
    /// The model.
    pub model: &'a str,
    /// Base prompt and instructions.
    pub instructions: &'a str,
    /// The tools offered.
    pub tools: &'a [ToolSpec],
    /// The effective explicit effort, `None` for `default`.
    pub effort: Option<&'a str>,
    /// How an Anthropic model takes effort.
    pub thinking: Thinking,
    /// The provider's output bound; a step's is at most the window less its estimate
    /// (`decisions.md` 45), the summary request's at most a quarter of the window.
    pub max_output_tokens: u64,
    /// Steps per turn.
    pub max_steps: u32,
    /// The model's context window in tokens; `u64::MAX` never compacts (the scripted
    /// provider, which reads no conversation).
    pub context_window: u64,
}

/// The machine's configuration from the worker's runtime and the run's output.
pub fn config(out: &RunOutput<'_>, prompt: &str, history: Snapshot, p: &LoopParams<'_>) -> Config {
    let rt = &out.ctx.rt;
    let s = &rt.settings;
    let quiet = out.subagent.is_some();
    // Tools an MCP server listed but that are not offered (decisions.md 37): once per child,
    // in its first run, as there is no `magi-code mcp list` to show them yet.
    let left_out = if quiet {
        None
    } else {
        out.ctx.mcp.as_ref().and_then(|h| h.left_out_report())
    };
    Config {
        session_id: out.session_id.clone(),
        run_id: out.run_id.clone(),
        record_session: out
            .subagent
            .as_ref()
            .map_or_else(|| out.session_id.clone(), |q| q.id().to_owned()),
        quiet,
        seed: uuid::Uuid::new_v4().as_u128(),
        prompt: prompt.to_owned(),
        history,
        provider: p.provider.to_owned(),
        fixed_bytes: fixed_bytes(p.instructions, p.tools),
        max_output_tokens: p.max_output_tokens,
        max_steps: p.max_steps,
        context_window: p.context_window,
        tools: out.tools.clone(),
        policies: Policies {
            read: s.tool_read,
            write: s.tool_write,
            shell: s.tool_shell,
            client: s.tool_client,
            mcp: s.tool_mcp,
            task: s.tool_task,
            code: s.tool_code,
        },
        hooks: s.hooks.clone(),
        tool_cards: rt.tool_cards,
        tool_details: rt.tool_details,
        cwd: rt.cwd.clone(),
        left_out,
        code: code_config(out),
    }
}

/// Code Mode's limits and nested policies, when the run's table has `exec`.
fn code_config(out: &RunOutput<'_>) -> Option<CodeConfig> {
    let c = &out.ctx.rt.settings.code_mode;
    let exec = out.tools.lookup(crate::codemode::decl::EXEC) == Some(ToolKind::Code);
    (c.enabled && exec).then(|| CodeConfig {
        policies: c.tools,
        timeout_ms: c.timeout_ms,
        cpu_ms: c.cpu_ms,
        memory_mib: c.memory_mib,
        max_calls: c.max_calls,
        tools: crate::run::cell::reachable(&out.tools),
    })
}

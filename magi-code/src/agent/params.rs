//! What a turn's requests send besides the conversation.

use crate::history::ToolSpec;
use crate::providers::model::Thinking;

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

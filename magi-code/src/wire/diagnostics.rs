//! Every `diagnostic` event code the backend sends, as one closed set: a new code is a new
//! variant here (and a row in `docs/runner.md`), never a string at a call site.

/// The `code` of a `diagnostic` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiagnosticCode {
    /// A provider step is retried after a wait.
    ProviderRetry,
    /// Connect, DNS or timeout on every attempt.
    ProviderUnreachable,
    /// The provider refused the credentials (401, 403).
    ProviderAuth,
    /// The provider answered another HTTP status.
    ProviderStatus,
    /// A malformed stream, one cut short, or only empty `200`s.
    ProviderStreamInvalid,
    /// The provider reported an error.
    ProviderError,
    /// The prompt does not fit the model's context.
    ContextOverflow,
    /// Even the smallest reply does not fit the window (`decisions.md` 45).
    ContextWindowTooSmall,
    /// The summary request of a compaction failed.
    CompactionFailed,
    /// The run reached a content bound.
    ContentLimit,
    /// The turn reached `runner.max_steps`.
    StepLimit,
    /// A tool call repeated past the runaway rule.
    RepeatedToolCall,
    /// A configured hook failed or timed out.
    HookFailed,
    /// An MCP server exited; its tools fail.
    McpServerExited,
    /// An MCP server broke the protocol and was stopped.
    McpServerFailed,
    /// Tools an MCP server listed that are not offered (`decisions.md` 37).
    McpToolsLeftOut,
    /// An HTTP MCP server refused its authorization mid-session; its call failed.
    McpAuthRequired,
}

impl DiagnosticCode {
    /// Every code, in the order of `docs/runner.md`'s table.
    pub const ALL: [Self; 17] = [
        Self::ProviderRetry,
        Self::ProviderUnreachable,
        Self::ProviderAuth,
        Self::ProviderStatus,
        Self::ProviderStreamInvalid,
        Self::ProviderError,
        Self::ContextOverflow,
        Self::ContextWindowTooSmall,
        Self::CompactionFailed,
        Self::ContentLimit,
        Self::StepLimit,
        Self::RepeatedToolCall,
        Self::HookFailed,
        Self::McpServerExited,
        Self::McpServerFailed,
        Self::McpToolsLeftOut,
        Self::McpAuthRequired,
    ];

    /// The code as sent on the wire.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ProviderRetry => "provider_retry",
            Self::ProviderUnreachable => "provider_unreachable",
            Self::ProviderAuth => "provider_auth",
            Self::ProviderStatus => "provider_status",
            Self::ProviderStreamInvalid => "provider_stream_invalid",
            Self::ProviderError => "provider_error",
            Self::ContextOverflow => "context_overflow",
            Self::ContextWindowTooSmall => "context_window_too_small",
            Self::CompactionFailed => "compaction_failed",
            Self::ContentLimit => "content_limit",
            Self::StepLimit => "step_limit",
            Self::RepeatedToolCall => "repeated_tool_call",
            Self::HookFailed => "hook_failed",
            Self::McpServerExited => "mcp_server_exited",
            Self::McpServerFailed => "mcp_server_failed",
            Self::McpToolsLeftOut => "mcp_tools_left_out",
            Self::McpAuthRequired => "mcp_auth_required",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DiagnosticCode;

    #[test]
    fn codes_are_distinct_and_match_the_wire_grammar() {
        let mut seen = std::collections::HashSet::new();
        for c in DiagnosticCode::ALL {
            let s = c.as_str();
            assert!(seen.insert(s), "{s} twice");
            assert!(!s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        }
    }

    #[test]
    fn runner_doc_lists_every_code() {
        let doc = include_str!("../../../docs/runner.md");
        for c in DiagnosticCode::ALL {
            assert!(doc.contains(&format!("`{}`", c.as_str())), "{}", c.as_str());
        }
    }
}

//! The protocol's error codes in words, for people: the chat and the ACP adapter show a
//! refusal as what went wrong and what to do, with the code after it (`words::said`).

/// What `code` means for a person at a chat, or `None` for a code with nothing to add.
#[must_use]
pub fn meaning(code: &str) -> Option<&'static str> {
    Some(match code {
        "session_missing" => "there is no saved session with that ID here",
        "session_busy" => "another magi-code has that session open",
        "session_invalid" => "the session's files are damaged or unreadable",
        "cwd_mismatch" => "the session belongs to another folder: start the chat there",
        "history_limit" => "the session is too large to open",
        "stale_session" => "that session is no longer the attached one",
        "stale_revision" => "the list changed while it was read: ask again",
        "busy" => "the server is busy with another request: try again when it ends",
        "content_limit" => "the prompt is too long (at most 16,384 bytes)",
        "invalid_params" => "the server did not accept the request",
        "provider_unavailable" => "the model's provider is not available (run `magi-code doctor`)",
        "configuration_invalid" => "the settings are invalid (run `magi-code doctor`)",
        "profile_invalid" => "the agent profile is invalid (run `magi-code doctor`)",
        "mcp_unavailable" => "an MCP server did not start (run `magi-code doctor`)",
        "persistence_failed" => "the session could not be saved to disk",
        "execution_failed" => "the model or a tool failed",
        "output_unavailable" => "the server could not deliver the turn's events",
        "stale_run" => "that turn already ended",
        "stale_approval" => "that approval request is already closed",
        "catalog_unavailable" => "the model catalog could not be read",
        "catalog_limit" => "the model catalog is too large to list",
        "stale_catalog" => "the model catalog changed: list it again",
        "stale_selection" => "the selection changed meanwhile: try again",
        "selection_invalid" => "that model cannot be selected",
        "effort_unsupported" => "the model does not take that effort level",
        "operation_cancelled" => "the request was cancelled",
        "startup_failed" => "the server failed to start (run `magi-code doctor`)",
        _ => return None,
    })
}

/// `code` for a person: its meaning with the code after it, or the code alone.
#[must_use]
pub fn said(code: &str) -> String {
    let code: String = code.chars().filter(|c| !c.is_control()).take(64).collect();
    match meaning(&code) {
        Some(m) => format!("{m} ({code})"),
        None => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_code_is_said_in_words_with_the_code_after() {
        assert_eq!(
            said("cwd_mismatch"),
            "the session belongs to another folder: start the chat there (cwd_mismatch)"
        );
        assert_eq!(said("no answer"), "no answer");
        // Every code the session, turn and selection requests refuse with has words.
        for code in [
            "session_missing",
            "session_busy",
            "session_invalid",
            "history_limit",
            "busy",
            "content_limit",
            "stale_selection",
            "effort_unsupported",
            "persistence_failed",
            "execution_failed",
        ] {
            assert!(meaning(code).is_some(), "{code}");
        }
    }
}

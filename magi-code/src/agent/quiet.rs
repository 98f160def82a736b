//! A subagent's voice: its records go to its own history, and it keeps the text it ended
//! with (the `task` call's result).

use crate::history::{Body, Record};
use crate::store::Appender;
use protocol_core::ErrorCode;
use std::sync::{Mutex, PoisonError};

/// A subagent's voice: where its records go and the text it ended with.
pub struct Quiet {
    id: String,
    file: Mutex<QuietFile>,
}

struct QuietFile {
    appender: Appender,
    /// The text of the last assistant segment not followed by a tool call.
    last_text: String,
}

impl Quiet {
    /// The voice of subagent `id` appending through `appender`.
    #[must_use]
    pub fn new(id: String, appender: Appender) -> Self {
        Self {
            id,
            file: Mutex::new(QuietFile {
                appender,
                last_text: String::new(),
            }),
        }
    }

    /// The subagent's own ID (`<session_id>-<n>`), which its records carry.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Appends records to the subagent's history and fsyncs (the primary history's appender).
    pub fn append(&self, records: &[Record]) -> Result<(), ErrorCode> {
        let mut f = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        f.appender
            .append(records)
            .map_err(|_| ErrorCode::PersistenceFailed)?;
        for r in records {
            match &r.body {
                Body::AssistantMessage {
                    text: Some(t),
                    partial: false,
                    ..
                } => t.clone_into(&mut f.last_text),
                Body::ToolCall { .. } => f.last_text.clear(),
                _ => {}
            }
        }
        Ok(())
    }

    /// The text of the last assistant segment not followed by a tool call: the reply.
    #[must_use]
    pub fn final_text(&self) -> String {
        let f = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        f.last_text.clone()
    }
}

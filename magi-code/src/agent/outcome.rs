//! How a run ended, as `run.finished` reports it.

pub use crate::history::RunOutcome;
use protocol_core::ErrorCode;
use serde_json::{json, Value};

/// What became of a run's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// Every record of the run was appended and synced.
    Durable,
    /// Some records may be missing: the history is not known to be complete.
    Degraded,
    /// Nothing was persisted: the input append itself failed.
    NotStarted,
}

impl Persistence {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Durable => "durable",
            Self::Degraded => "degraded",
            Self::NotStarted => "not_started",
        }
    }
}

/// The terminal facts of a run: the `run.finished` data without its IDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// How it ended.
    pub outcome: RunOutcome,
    /// What became of its records.
    pub persistence: Persistence,
    /// The history revision that pages the new records, when durable and re-read.
    pub revision: Option<String>,
    /// Why it failed.
    pub error_code: Option<ErrorCode>,
}

impl Finished {
    /// The `run.finished` fields besides `session_id` and `run_id`.
    #[must_use]
    pub fn to_value(&self) -> Value {
        json!({
            "outcome": self.outcome.as_str(),
            "persistence": self.persistence.as_str(),
            "revision": self.revision,
            "error_code": self.error_code.map(ErrorCode::as_str),
        })
    }
}

//! How a run ended, as `run.finished` reports it.

pub use crate::history::RunOutcome;
use crate::wire::events::{self as wire, Outcome, RunFinishedData};
use protocol_core::ErrorCode;

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
    /// The `run.finished` data of run `run_id` of `session_id`.
    #[must_use]
    pub fn to_data(&self, session_id: String, run_id: String) -> RunFinishedData {
        RunFinishedData {
            session_id,
            run_id,
            outcome: match self.outcome {
                RunOutcome::Completed => Outcome::Completed,
                RunOutcome::Cancelled => Outcome::Cancelled,
                RunOutcome::Failed => Outcome::Failed,
            },
            persistence: match self.persistence {
                Persistence::Durable => wire::Persistence::Durable,
                Persistence::Degraded => wire::Persistence::Degraded,
                Persistence::NotStarted => wire::Persistence::NotStarted,
            },
            revision: self.revision.clone(),
            error_code: self.error_code.map(|c| c.as_str().to_owned()),
        }
    }
}

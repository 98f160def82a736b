//! What every state of a run reads and changes: its configuration and voice, the
//! conversation, the bounds, the records not yet appended and the run's counters. The states
//! (`step`, `calls`, `compacting`) take it and say what comes next; only `machine` moves
//! between them.

use super::compaction::Compactor;
use super::content::Content;
use super::io::{Config, Output};
use super::repeats::Repeats;
use super::voice::Voice;
use crate::history::compact::Snapshot;
use crate::history::room::Room;
use crate::history::{Item, Record};

/// One run's shared state.
#[derive(Debug)]
pub struct Shared {
    /// What the run was started with.
    pub cfg: Config,
    /// Its IDs and queued outputs.
    pub voice: Voice,
    /// The latest time an input came with (ms on the driver's clock).
    pub now: u64,
    /// Cancelled (`turn.cancel`, shutdown, EOF, or a lost output).
    pub cancelled: bool,
    /// A record could not be stored: the history is not what the run went on with.
    pub degraded: bool,
    /// The conversation the next request sends.
    pub items: Vec<Item>,
    /// The compaction estimate and what a compaction keeps.
    pub comp: Compactor,
    /// The run's content bounds and the session's projection room.
    pub content: Content,
    /// The run's records of the step so far; those before `stored` are appended already
    /// (the step's first part, stored before a cell runs).
    pub records: Vec<Record>,
    pub stored: usize,
    /// Steps taken.
    pub steps: u32,
    /// An overflowed step was compacted and sent again.
    pub retried: bool,
    /// The row of equal consecutive calls.
    pub repeats: Repeats,
    /// Activities emitted (`run_activities` bounds them).
    pub activities: usize,
    /// A call found no room under that bound.
    pub activities_full: bool,
    /// When the work of the calls being prepared must be cut short: a cell's clock while its
    /// nested calls run, else `None`.
    pub work_until: Option<u64>,
}

impl Shared {
    /// The shared state of a run configured with `cfg`, before its input is stored.
    #[must_use]
    pub fn new(cfg: Config) -> Self {
        let mut voice = Voice::new(
            cfg.session_id.clone(),
            cfg.run_id.clone(),
            cfg.record_session.clone(),
            cfg.seed,
        );
        voice.quiet = cfg.quiet;
        // Replaced once the input is stored, from the history the run starts on.
        let comp = Compactor::start(
            Snapshot::default(),
            cfg.context_window,
            cfg.fixed_bytes,
            cfg.cwd.clone(),
            "",
        )
        .0;
        Self {
            cfg,
            voice,
            now: 0,
            cancelled: false,
            degraded: false,
            items: Vec::new(),
            comp,
            content: Content::start(Room::none()),
            records: Vec::new(),
            stored: 0,
            steps: 0,
            retried: false,
            repeats: Repeats::default(),
            activities: 0,
            activities_full: false,
            work_until: None,
        }
    }

    /// Whether another activity fits the run's bound (`run_activities`); counts it if so.
    pub fn take_activity(&mut self) -> bool {
        let room = self.activities < protocol_core::limits::RUN_ACTIVITIES;
        if room {
            self.activities += 1;
        } else {
            self.activities_full = true;
        }
        room
    }

    /// The step's records not appended yet, taken (the step is over).
    pub fn unstored(&mut self) -> Vec<Record> {
        let mut records = std::mem::take(&mut self.records);
        records.drain(..self.stored.min(records.len()));
        self.stored = 0;
        records
    }

    /// The step's records not appended yet, copied, and counted as appended from now.
    pub fn store_so_far(&mut self) -> Vec<Record> {
        let records = self.records.get(self.stored..).unwrap_or_default().to_vec();
        self.stored = self.records.len();
        records
    }

    /// Queues an output for the driver.
    pub fn push(&mut self, o: Output) {
        self.voice.queue.push_back(o);
    }
}

//! What a history says besides its projection: its summary and saved preferences.

/// Saved selection preferences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preferences {
    /// Provider.
    pub provider: String,
    /// Model.
    pub model: String,
    /// Requested effort.
    pub effort: String,
}

/// What a validated stored history says besides its projection.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Whether the last line had no LF (an interrupted append, ignored).
    pub torn_tail: bool,
    /// Every non-empty recorded cwd.
    pub cwds: Vec<String>,
    /// Greatest record timestamp (epoch ms).
    pub updated_ms: Option<i64>,
    /// Latest title from `title` or `compaction` records.
    pub title: Option<String>,
    /// Latest saved preferences.
    pub preferences: Option<Preferences>,
    /// Records read.
    pub records: usize,
    /// Turns recorded (`user_input` records).
    pub turns: usize,
}

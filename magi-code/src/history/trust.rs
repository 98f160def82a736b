//! Which lines of a window read must be parsed (sans-IO): a line the owner's verified
//! metadata covers (`decisions.md` 50) was validated when its owner read or wrote it, so it is
//! only counted when no projection, replay or written-file list of its turn can need it. The
//! decision follows the metadata's horizon and the turn each line falls in; it errs toward
//! parsing, and a parsed line changes nothing a full read would not.

use super::compact::FILE_TOOLS;
use super::meta::{sniff_type, Meta};
use super::record::{Body, Record};

/// Which turns of a read keep their replay items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Items {
    /// Those a replay still needs: from the newest compaction's turns on.
    #[default]
    Needed,
    /// Every turn's (a read again after the window dropped the compaction that freed some).
    All,
    /// Only the first whole turn's (the title's exchange): an open builds no replay; the first
    /// turn that needs one reads the window again.
    Deferred,
}

/// The decision state of one read.
#[derive(Debug, Clone)]
pub struct Trust {
    covered: u64,
    shown_from: u64,
    replay_from: u64,
    project: bool,
    items: Items,
    /// Turns started so far.
    turns: usize,
    /// The turn the next line falls in: whether it is projected and replayed, and whether
    /// one of its calls named a file tool; `None` before the first line.
    turn: Option<(bool, bool, bool)>,
}

impl Trust {
    /// The decisions of a read with verified metadata `meta` (none: every line is parsed),
    /// building a projection and replay when `project`, keeping `items`.
    #[must_use]
    pub fn new(meta: Option<&Meta>, project: bool, items: Items) -> Self {
        Self {
            covered: meta.map_or(0, |m| m.covered),
            shown_from: meta.map_or(0, |m| m.shown_from),
            replay_from: meta.map_or(0, |m| m.replay_from),
            project,
            items,
            turns: 0,
            turn: None,
        }
    }

    /// Whether a group starting at `offset` keeps a projection and a replay, `turns` turns
    /// (groups starting with a `user_input`) having started before it and `turn` saying
    /// whether it is one: the same choice the window state makes when it starts one.
    #[must_use]
    pub const fn keeps(&self, offset: u64, turn: bool, turns: usize) -> (bool, bool) {
        let replay = match self.items {
            Items::Needed => offset >= self.replay_from,
            Items::All => true,
            Items::Deferred => turn && turns == 0,
        };
        (
            self.project && offset >= self.shown_from,
            self.project && replay,
        )
    }

    /// Whether the line at `offset` lies within what the metadata covers: validated when its
    /// owner read or wrote it, so it may be read the quick way.
    #[must_use]
    pub const fn covers(&self, offset: u64) -> bool {
        offset < self.covered
    }

    /// Whether the line at `offset` must be parsed.
    #[must_use]
    pub fn needs(&self, offset: u64, line: &[u8]) -> bool {
        let Some((projected, replayed, file_call)) = self.turn else {
            return true;
        };
        if offset >= self.covered {
            return true;
        }
        match sniff_type(line) {
            Some(b"tool_result") => replayed || file_call,
            Some(b"provider_item") => replayed,
            Some(b"code_call" | b"code_result") => false,
            // A call can name a written file only if a file tool's name is in it at all.
            Some(b"tool_call") => {
                replayed
                    || FILE_TOOLS
                        .iter()
                        .any(|t| memchr::memmem::find(line, t.as_bytes()).is_some())
            }
            Some(b"activity" | b"assistant_chunk" | b"reasoning_summary" | b"tool_card") => {
                projected
            }
            Some(b"assistant_message") => projected || replayed,
            _ => true,
        }
    }

    /// Takes a parsed record at `offset`: a `user_input` (or the first record) starts a turn,
    /// a file tool's call marks its turn.
    pub fn parsed(&mut self, r: &Record, offset: u64) {
        match &r.body {
            Body::UserInput { .. } => {
                self.start(offset, true);
                self.turns += 1;
            }
            Body::ToolCall { name, .. } if FILE_TOOLS.contains(&name.as_str()) => {
                if let Some(t) = self.turn.as_mut() {
                    t.2 = true;
                }
            }
            _ if self.turn.is_none() => self.start(offset, false),
            _ => {}
        }
    }

    fn start(&mut self, offset: u64, turn: bool) {
        let (p, r) = self.keeps(offset, turn, self.turns);
        self.turn = Some((p, r, false));
    }
}

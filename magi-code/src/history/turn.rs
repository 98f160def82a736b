//! One turn of a history's read window (or the lead: the records before its first turn):
//! its records' sizes, its projection and replay, its compaction and usage, as the window
//! state (`state.rs`) keeps them.

use super::compact::Written;
use super::meta::Meta;
use super::projection::{Projector, TurnParts};
use super::record::{Body, Record};
use super::replay::{Item, Replay};
use std::collections::VecDeque;

/// The latest compaction of a turn.
#[derive(Debug, Clone)]
pub(super) struct Point {
    pub(super) summary: String,
    /// Its `through` as stored (absent: everything before it).
    pub(super) through: Option<u64>,
    /// Its own sequence number.
    pub(super) seq: u64,
    /// The `compaction` record's index in its group.
    pub(super) local: usize,
    /// The group replay's item count when it came.
    pub(super) item_at: usize,
}

/// What a group's records say of usage: the last `usage` record's input tokens, whether a
/// compaction came after it, and the stored bytes of the other records after it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Usage {
    pub(super) tokens: Option<u64>,
    pub(super) reset: bool,
    pub(super) after: u64,
}

/// One turn of the window (records from its `user_input` to the next), or the lead: the
/// records before the window's first `user_input`.
#[derive(Debug)]
pub(super) struct Group {
    /// A turn (it starts with its `user_input`), not the lead.
    pub(super) turn: bool,
    /// File offset of its first record.
    pub(super) start: u64,
    /// It holds every record of its turn (the lead: of the file's start).
    pub(super) whole: bool,
    /// Stored line lengths of its records in the window, oldest first.
    pub(super) sizes: VecDeque<u64>,
    /// Records dropped from its front as the window moved on (after the first record, which
    /// is never dropped, when it holds it).
    pub(super) dropped: usize,
    /// It holds the file's first record (at index 0).
    pub(super) keeps_first: bool,
    /// The projector while the group is the newest.
    pub(super) projector: Option<Projector>,
    /// Its parts once closed; `None` once no projection can show it any more.
    pub(super) parts: Option<TurnParts>,
    /// A run of it has no `run_finished`.
    pub(super) open: bool,
    /// Its replay; `None` once no replay needs its items any more.
    pub(super) replay: Option<Replay>,
    /// Its input and the input's sequence number.
    pub(super) input: Option<(u64, String)>,
    /// Files its calls wrote or edited.
    pub(super) written: Written,
    pub(super) comp: Option<Point>,
    pub(super) usage: Usage,
}

impl Group {
    /// A group starting at `start`; `project` and `replay` say whether it keeps a projection
    /// and a replay (a turn no projection can show, or before the replay's start, keeps none).
    pub(super) fn new(
        (turn, whole, start): (bool, bool, u64),
        cards: bool,
        project: bool,
        replay: bool,
    ) -> Self {
        Self {
            turn,
            start,
            whole,
            sizes: VecDeque::new(),
            dropped: 0,
            keeps_first: false,
            projector: project.then(|| Projector::with_cards(cards)),
            parts: None,
            open: false,
            replay: replay.then(Replay::default),
            input: None,
            written: Written::default(),
            comp: None,
            usage: Usage::default(),
        }
    }

    /// Its replay items, when kept (a group cut at its front has none: its turn is not whole).
    pub(super) fn items(&self) -> Option<&[Item]> {
        if !self.whole {
            return Some(&[]);
        }
        self.replay.as_ref().map(Replay::items)
    }

    /// Whether its record at index `local` is still in the window.
    pub(super) fn holds(&self, local: usize) -> bool {
        let kept = usize::from(self.keeps_first);
        local < kept || local >= kept + self.dropped
    }

    /// Its compaction, if that record is still in the window.
    pub(super) fn point(&self) -> Option<&Point> {
        self.comp.as_ref().filter(|p| self.holds(p.local))
    }

    /// Ends the group: its projection settles into parts and its turn closes as interrupted
    /// if no `run_finished` closed it.
    pub(super) fn close(&mut self) {
        if let Some(p) = self.projector.take() {
            self.open = p.open();
            self.parts = Some(p.parts());
        }
        if let Some(r) = self.replay.as_mut() {
            r.close_open_turn();
        }
    }

    pub(super) fn parts(&self) -> Option<TurnParts> {
        match &self.projector {
            Some(p) => Some(p.parts()),
            None => self.parts.clone(),
        }
    }

    pub(super) fn is_open(&self) -> bool {
        self.projector.as_ref().map_or(self.open, Projector::open)
    }
}

/// Derived metadata read beside a window that does not reach the file's start, and what the
/// window's records said on either side of the length it covers.
#[derive(Debug)]
pub(super) struct Seed {
    pub(super) meta: Meta,
    /// Counted window records before the covered length.
    pub(super) before: u64,
    /// `user_input` records at or after it.
    pub(super) turns_after: usize,
    /// A title or preferences record at or after it.
    pub(super) title_after: bool,
    pub(super) prefs_after: bool,
}

impl Group {
    /// Takes record `r` of the turn, stored at `offset` with sequence number `seq` in a line of
    /// `bytes` bytes.
    pub(super) fn take(&mut self, r: &Record, offset: u64, seq: u64, bytes: u64) {
        let local = self.dropped + self.sizes.len();
        self.sizes.push_back(bytes);
        if let Some(p) = self.projector.as_mut() {
            p.push(r, offset);
        }
        self.written.note(&r.body);
        match &r.body {
            Body::UserInput { text, .. } => {
                self.input = Some((seq, text.clone()));
                self.usage.after += bytes;
            }
            Body::Usage { input_tokens, .. } => {
                self.usage = Usage {
                    tokens: Some(*input_tokens),
                    reset: false,
                    after: 0,
                };
            }
            Body::Compaction {
                summary: Some(summary),
                through,
                ..
            } => {
                self.usage.after += bytes;
                self.usage.reset = true;
                self.comp = Some(Point {
                    summary: summary.clone(),
                    through: *through,
                    seq,
                    local,
                    item_at: self.replay.as_ref().map_or(0, |rp| rp.items().len()),
                });
            }
            _ => self.usage.after += bytes,
        }
        if let Some(rp) = self.replay.as_mut() {
            rp.push(r, usize::try_from(bytes).unwrap_or(usize::MAX));
        }
    }
}

impl Group {
    /// Counts a record of `bytes` bytes that nothing of the group needs.
    pub(super) fn skip(&mut self, bytes: u64) {
        self.sizes.push_back(bytes);
        self.usage.after += bytes;
    }
}

impl Seed {
    /// Notes record `r` at `offset` (`first`: the file's first record, never counted): which
    /// side of the covered length it lies on, and what it says after it.
    pub(super) fn note(&mut self, r: &Record, offset: u64, first: bool) {
        if offset < self.meta.covered {
            self.before += u64::from(!first);
            return;
        }
        match &r.body {
            Body::UserInput { .. } => self.turns_after += 1,
            Body::Title { .. } | Body::Compaction { title: Some(_), .. } => self.title_after = true,
            Body::SessionPreferences { .. } => self.prefs_after = true,
            _ => {}
        }
    }
}

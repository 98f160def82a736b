//! The state derived from a history's read window (`decisions.md` 47–48), record by record:
//! the summary, the turns the window holds with their projections and replays, and the
//! window's own bounds, which it keeps by dropping its oldest records as appends go past them.
//! Sans-IO: lines and offsets in; projection, replay snapshot and summary out.

use super::compact::Snapshot;
use super::meta::Meta;
use super::projection::{self, Projection, TurnParts, SNAPSHOT_BYTES, SNAPSHOT_PARTS};
use super::record::{Body, HistoryError, Record};
use super::replay::Item;
use super::start::{self, Base};
use super::summary::{Preferences, Summary};
use super::trust::{Items, Trust};
use super::turn::{Group, Seed};
use super::window::Bounds;
use crate::store::SessionId;
use crate::util::time::parse_rfc3339;
use std::collections::VecDeque;

pub use super::start::LEFT_OUT_NOTE;

/// The state derived from one history's read window, extended record by record. It refuses
/// what a stored read refuses, so extending it equals reading the window afresh.
#[derive(Debug)]
pub struct History {
    id: SessionId,
    summary: Summary,
    project: bool,
    cards: bool,
    /// Which turns keep their replay items.
    items: Items,
    /// Turns started so far.
    turns: usize,
    bounds: Bounds,
    groups: VecDeque<Group>,
    /// Whether the window reaches the file's start.
    whole: bool,
    /// Counted window bytes and lines (the first record excluded).
    bytes: u64,
    lines: usize,
    /// Records taken (the next record's sequence number).
    seq: u64,
    base: Base,
    /// File offset just after the last record taken.
    end: u64,
    /// Offset of the window's first counted line.
    start: u64,
    /// The replay horizon the metadata read with the window gave (0: none), which a state
    /// that defers its replay passes on.
    prior_replay_from: u64,
    seed: Option<Seed>,
    /// Sticky: the first refusal.
    error: Option<HistoryError>,
}

impl History {
    /// The state of an empty history of `id`; `project` keeps the projection and replay too.
    #[must_use]
    pub fn new(id: &SessionId, project: bool) -> Self {
        Self {
            id: id.clone(),
            summary: Summary::default(),
            project,
            cards: false,
            items: Items::Needed,
            turns: 0,
            bounds: Bounds::READ,
            groups: VecDeque::new(),
            whole: true,
            bytes: 0,
            lines: 0,
            seq: 0,
            base: Base::Known(0),
            end: 0,
            start: 0,
            prior_replay_from: 0,
            seed: None,
            error: None,
        }
    }

    /// The state of a history known up to `meta`'s covered length through its derived
    /// metadata alone, to be extended by the records after it (discovery of a large file,
    /// `decisions.md` 49): the summary is the metadata's, the window starts at the cover.
    #[must_use]
    pub fn from_meta(id: &SessionId, meta: &Meta) -> Self {
        let mut h = Self::new(id, false);
        h.whole = false;
        h.base = Base::Known(meta.records);
        h.end = meta.covered;
        h.start = meta.covered;
        h.summary = Summary {
            cwds: meta.cwds.clone(),
            updated_ms: meta.updated_ms,
            title: meta.title.clone(),
            preferences: meta.prefs(),
            turns: usize::try_from(meta.turns).unwrap_or(usize::MAX),
            ..Summary::default()
        };
        h
    }

    /// Takes derived metadata verified against the file (`decisions.md` 50), before the
    /// window's lines: what it says of the records before the window (the base of the record
    /// indices, the turn count, the latest title and preferences, the newest timestamp) is
    /// used once the read ends.
    pub fn seed(&mut self, meta: Meta) {
        self.prior_replay_from = meta.replay_from;
        self.seed = Some(Seed {
            meta,
            before: 0,
            turns_after: 0,
            title_after: false,
            prefs_after: false,
        });
    }

    /// Projects `tool_card` entries (the child negotiated `tool.cards`); before the first record.
    pub fn show_cards(&mut self, cards: bool) {
        self.cards = cards;
    }

    /// Which turns keep their replay items (default: those a replay still needs).
    pub fn keep_items(&mut self, items: Items) {
        self.items = items;
    }

    /// A window under other bounds than the protocol's (tests); before the first record.
    pub fn set_bounds(&mut self, bounds: Bounds) {
        self.bounds = bounds;
    }

    /// The read went on at `offset`, past a gap after the first record: the window does not
    /// reach the file's start, and the group of the first record is not whole.
    pub fn skip_to(&mut self, offset: u64) {
        if offset > self.end {
            self.whole = false;
            self.start = offset;
            self.base = Base::Unknown;
            if let Some(g) = self.groups.back_mut() {
                g.whole = false;
            }
            self.end = offset;
        }
    }

    /// The absolute index of the window's sequence 0, when known otherwise than from the
    /// window (derived metadata); before the first counted record.
    pub fn set_base(&mut self, base: u64) {
        if !self.whole {
            self.base = Base::Known(base);
        }
    }

    /// Takes one complete stored line (LF excluded).
    pub fn line(&mut self, line: &[u8]) -> Result<(), HistoryError> {
        match Record::parse(line) {
            Ok(r) => self.push(&r, line.len() + 1),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Takes one complete stored line as [`Self::line`] does, unless `trust` says nothing
    /// needs it parsed: then it is only counted.
    pub fn line_trusted(&mut self, line: &[u8], trust: &mut Trust) -> Result<(), HistoryError> {
        if trust.needs(self.end, line) {
            let offset = self.end;
            // A line the metadata covers was validated by its owner: the quick read.
            let parsed = if trust.covers(offset) {
                super::quick::parse_trusted(line)
            } else {
                Record::parse(line)
            };
            let r = parsed.map_err(|e| self.fail(e))?;
            trust.parsed(&r, offset);
            self.push(&r, line.len() + 1)
        } else {
            self.skip(line.len() as u64 + 1)
        }
    }

    /// Counts one stored line of `bytes` bytes that nothing of its turn needs: a line the
    /// owner's metadata covers, decided by a [`Trust`].
    pub fn skip(&mut self, bytes: u64) -> Result<(), HistoryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if bytes > self.bounds.bytes {
            return Err(self.fail(HistoryError::TooLarge));
        }
        self.seq += 1;
        self.end += bytes;
        self.summary.records += 1;
        if let Some(s) = self.seed.as_mut() {
            s.before += 1;
        }
        if let Some(g) = self.groups.back_mut() {
            g.skip(bytes);
        }
        self.bytes += bytes;
        self.lines += 1;
        self.slide();
        Ok(())
    }

    /// The decisions of a read of this state's window: which lines need parsing.
    #[must_use]
    pub fn trust(&self) -> Trust {
        Trust::new(
            self.seed.as_ref().map(|s| &s.meta),
            self.project,
            self.items,
        )
    }

    /// Where the read window starts: 0 when it reaches the file's start, else its first
    /// counted line (the metadata's hint for the next read).
    #[must_use]
    pub const fn window_start(&self) -> u64 {
        if self.whole {
            0
        } else {
            self.end - self.bytes
        }
    }

    /// Where no projection can show a turn any more and no replay needs one: the starts of the
    /// oldest groups still keeping each (the state's end when none does), for the metadata.
    #[must_use]
    pub fn horizon(&self) -> (u64, u64) {
        let from = |keeps: &dyn Fn(&Group) -> bool| {
            self.groups
                .iter()
                .find(|g| keeps(g))
                .map_or(self.end, |g| g.start)
        };
        let replay_from = match self.items {
            // A deferred replay freed nothing: the horizon read with the window still holds
            // (a later compaction only moves it on).
            Items::Deferred => self.prior_replay_from.min(self.end),
            Items::Needed | Items::All => from(&|g| g.replay.is_some()),
        };
        (
            from(&|g| g.projector.is_some() || g.parts.is_some()),
            replay_from,
        )
    }

    /// Takes one record whose stored line is `bytes` long (LF included).
    pub fn push(&mut self, r: &Record, bytes: usize) -> Result<(), HistoryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.record(r, bytes as u64).map_err(|e| self.fail(e))
    }

    /// Sticks `e` and frees what no longer can be used.
    fn fail(&mut self, e: HistoryError) -> HistoryError {
        self.error = Some(e);
        self.groups.clear();
        e
    }

    fn record(&mut self, r: &Record, bytes: u64) -> Result<(), HistoryError> {
        if r.session_id != self.id.as_str() {
            return Err(HistoryError::Invalid);
        }
        let ts = parse_rfc3339(&r.ts).ok_or(HistoryError::Invalid)?;
        let first = self.seq == 0 && self.end == 0;
        if !first && bytes > self.bounds.bytes {
            // A record no window can hold (`decisions.md` 47).
            return Err(HistoryError::TooLarge);
        }
        self.note(r, ts);
        let offset = self.end;
        if let Some(s) = self.seed.as_mut() {
            s.note(r, offset, first);
        }
        let seq = self.seq;
        self.seq += 1;
        self.end += bytes;
        let input = matches!(r.body, Body::UserInput { .. });
        if input || self.groups.is_empty() {
            if let Some(g) = self.groups.back_mut() {
                g.close();
            }
            let whole = input || self.whole;
            // What the owner's metadata says no projection shows and no replay needs any more
            // is not built again (the same turns a full read would forget).
            let (project, replay) = self.trust().keeps(offset, input, self.turns);
            self.turns += usize::from(input);
            let mut g = Group::new((input, whole, offset), self.cards, project, replay);
            g.keeps_first = first;
            self.groups.push_back(g);
            self.forget_unshowable();
        }
        let g = self.groups.back_mut().ok_or(HistoryError::Invalid)?;
        g.take(r, offset, seq, bytes);
        if !first {
            self.bytes += bytes;
            self.lines += 1;
            self.slide();
        }
        if matches!(
            r.body,
            Body::Compaction {
                summary: Some(_),
                ..
            }
        ) {
            self.forget_unreplayed();
        }
        Ok(())
    }

    /// The summary's part of a record.
    fn note(&mut self, r: &Record, ts: i64) {
        let sum = &mut self.summary;
        sum.records += 1;
        sum.updated_ms = Some(sum.updated_ms.map_or(ts, |u| u.max(ts)));
        if let Some(cwd) = r.cwd.as_deref().filter(|c| !c.is_empty()) {
            if !sum.cwds.iter().any(|c| c == cwd) {
                sum.cwds.push(cwd.to_owned());
            }
        }
        match &r.body {
            Body::UserInput { .. } => sum.turns += 1,
            Body::Title { title }
            | Body::Compaction {
                title: Some(title), ..
            } => {
                sum.title = Some(title.clone());
            }
            Body::SessionPreferences {
                provider,
                model,
                effort,
            } => {
                sum.preferences = Some(Preferences {
                    provider: provider.clone(),
                    model: model.clone(),
                    effort: effort.clone(),
                });
            }
            _ => {}
        }
    }

    /// Drops the oldest counted records while the window is over its bound.
    fn slide(&mut self) {
        while self.bytes > self.bounds.bytes || self.lines > self.bounds.lines {
            // The first record is never dropped: it is not counted.
            let Some(k) = self
                .groups
                .iter()
                .position(|g| g.sizes.len() > usize::from(g.keeps_first))
            else {
                return;
            };
            let g = &mut self.groups[k];
            let Some(size) = g.sizes.remove(usize::from(g.keeps_first)) else {
                return;
            };
            g.dropped += 1;
            g.whole = false;
            let empty = g.sizes.is_empty();
            self.bytes -= size;
            self.lines -= 1;
            self.whole = false;
            if empty {
                self.groups.remove(k);
            }
        }
    }

    /// Frees the parts of closed turns no projection can show any more: older than closed
    /// turns that alone fill the snapshot budget.
    fn forget_unshowable(&mut self) {
        let (mut bytes, mut parts) = (0usize, 0usize);
        let mut full = false;
        for g in self.groups.iter_mut().rev() {
            if full {
                g.parts = None;
                continue;
            }
            if let Some(p) = &g.parts {
                bytes += p.bytes;
                parts += p.parts.len();
                full = bytes > SNAPSHOT_BYTES || parts > SNAPSHOT_PARTS;
            }
        }
    }

    /// Frees the replay items of turns the newest compaction made unneeded (their inputs and
    /// files are kept).
    fn forget_unreplayed(&mut self) {
        if self.items != Items::Needed {
            return;
        }
        let Some((gi, start)) = self.replay_start() else {
            return;
        };
        for g in self.groups.iter_mut().take(gi.min(start)) {
            g.replay = None;
        }
    }

    /// The absolute index of sequence number `seq`, as far as it is known (an unknown base
    /// counts from the window).
    fn base_of(&self, seq: u64) -> u64 {
        self.base.of(seq)
    }

    /// The group of the newest compaction in the window and the first group its replay
    /// starts from.
    fn replay_start(&self) -> Option<(usize, usize)> {
        start::replay_start(&self.groups, self.base)
    }

    /// Ends a read of the stored file: `torn_tail` says its last line had no LF. A turn open
    /// there stays open in the replay (a rebuild under our own running turn).
    pub fn finish_read(&mut self, torn_tail: bool) {
        self.summary.torn_tail = torn_tail;
        if let Some(s) = self.seed.take() {
            self.use_seed(&s);
        }
        if self.base == Base::Unknown {
            // Calibrate the base from the newest compaction: its `through` names its turn.
            let calibrated = self.groups.iter().rev().find_map(|g| {
                let p = g.point()?;
                let (s, _) = g.input.as_ref().filter(|_| g.whole)?;
                p.through?.checked_sub(*s)
            });
            if let Some(b) = calibrated {
                self.base = Base::Known(b);
            }
        }
    }

    /// Takes what verified metadata says of the records before a window that does not reach
    /// the file's start, when its covered length lies within the window.
    fn use_seed(&mut self, s: &Seed) {
        let m = &s.meta;
        // A read from the file's start saw everything itself (it may have slid since).
        if self.start == 0 || m.covered > self.end {
            return;
        }
        let sum = &mut self.summary;
        if m.covered < self.start {
            // Records between the cover and the window were not read: only what the window
            // lacks is taken, as the best known.
            if sum.title.is_none() {
                sum.title.clone_from(&m.title);
            }
            if sum.preferences.is_none() {
                sum.preferences = m.prefs();
            }
            sum.updated_ms = sum.updated_ms.max(m.updated_ms);
            return;
        }
        // The first counted record (sequence 1, after the first record) is the `before`-th
        // record counted back from the covered length.
        sum.turns = usize::try_from(m.turns).unwrap_or(usize::MAX) + s.turns_after;
        if !s.title_after && m.title.is_some() {
            sum.title.clone_from(&m.title);
        }
        if !s.prefs_after && m.preferences.is_some() {
            sum.preferences = m.prefs();
        }
        sum.updated_ms = sum.updated_ms.max(m.updated_ms);
        if let Some(b) = m.records.checked_sub(s.before + 1) {
            self.base = Base::Known(b);
        }
    }

    /// Closes a turn left open in the stored file as interrupted: at open, no live loop
    /// owns it.
    pub fn close_open_turn(&mut self) {
        if let Some(rp) = self.groups.back_mut().and_then(|g| g.replay.as_mut()) {
            rp.close_open_turn();
        }
    }

    /// Our own append succeeded: it cut any torn tail first.
    pub fn appended(&mut self) {
        self.summary.torn_tail = false;
    }

    /// The file offset just after the last record taken: where the next append lands.
    #[must_use]
    pub const fn end(&self) -> u64 {
        self.end
    }

    /// The projection window (`decisions.md` 48) of the history as it stands.
    pub fn project(&self) -> Result<Projection, HistoryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let mut turns: Vec<TurnParts> = Vec::new();
        let mut left_out = !self.whole;
        let mut interrupted = self.summary.torn_tail;
        for g in self.groups.iter().rev() {
            if !g.whole {
                left_out = true;
                break;
            }
            interrupted |= g.is_open();
            match g.parts() {
                Some(p) => turns.push(p),
                None => {
                    left_out = true;
                    break;
                }
            }
        }
        turns.reverse();
        Ok(projection::window(&turns, left_out, interrupted))
    }

    /// What the history says besides its projection.
    #[must_use]
    pub const fn summary(&self) -> &Summary {
        &self.summary
    }

    /// The absolute index the next record gets (the records before it, from the session's
    /// start, as far as the window knows them).
    #[must_use]
    pub fn records(&self) -> u64 {
        self.base_of(self.seq)
    }

    /// What a turn starts from (`runner.md` 7, `decisions.md` 47): the newest compaction in
    /// the window with the inputs before it and everything after it, or every whole turn after
    /// the fixed note when the window does not reach the file's start.
    /// `Evicted` when items it needs were freed, or when this state defers its replay.
    pub fn snapshot(&self) -> Result<Snapshot, HistoryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.items == Items::Deferred {
            return Err(HistoryError::Evicted);
        }
        start::snapshot(&self.groups, self.base, self.whole, self.records())
    }

    /// The items of the window's first whole turn, if kept (the title request's exchange).
    #[must_use]
    pub fn first_turn(&self) -> Option<&[Item]> {
        self.groups
            .iter()
            .find(|g| g.turn && g.whole)
            .and_then(Group::items)
    }

    /// The first refusal, if any.
    #[must_use]
    pub const fn error(&self) -> Option<HistoryError> {
        self.error
    }
}

#[cfg(test)]
mod tests;

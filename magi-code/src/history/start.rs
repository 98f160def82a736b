//! What a turn starts from (`runner.md` 7, `decisions.md` 47), computed over the turns of a
//! read window: the newest compaction in it, the inputs before it and everything after it, or
//! every whole turn after the fixed note when the window does not reach the file's start.

use super::compact::Snapshot;
use super::record::HistoryError;
use super::replay::Item;
use super::turn::{Group, Point};
use std::collections::VecDeque;

/// The fixed note in the summary's place when the window holds no compaction and does not
/// reach the file's start (`decisions.md` 47).
pub const LEFT_OUT_NOTE: &str = "earlier turns were left out";

/// How the absolute record indices of the window are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Base {
    /// The index of the window's sequence 0 (0 when it reaches the file's start).
    Known(u64),
    /// A window whose start's index is unknown: a compaction's `through` names its own turn.
    Unknown,
}

impl Base {
    /// The absolute index of sequence number `seq`, as far as it is known (an unknown base
    /// counts from the window).
    pub(super) const fn of(self, seq: u64) -> u64 {
        match self {
            Self::Known(b) => b + seq,
            Self::Unknown => seq,
        }
    }
}

/// A compaction's `through` as an absolute index (never past the record itself).
fn through(p: &Point, base: Base) -> u64 {
    let at = base.of(p.seq);
    p.through.map_or(at, |t| t.min(at))
}

/// The group of the newest compaction in the window and the first group its replay
/// starts from (the turns whose inputs are at or after its `through`; `len` if none).
pub(super) fn replay_start(groups: &VecDeque<Group>, base: Base) -> Option<(usize, usize)> {
    let gi = groups.iter().rposition(|g| g.point().is_some())?;
    let through = through(groups[gi].point()?, base);
    let start = match base {
        Base::Known(_) => groups
            .iter()
            .position(|g| {
                g.turn
                    && g.whole
                    && g.input
                        .as_ref()
                        .is_some_and(|(s, _)| base.of(*s) >= through)
            })
            .unwrap_or(groups.len()),
        // Without the window's base, `through` names the compaction's own turn (what this
        // backend writes), or the turn after it if that one is not whole.
        Base::Unknown => {
            if groups[gi].turn && groups[gi].whole {
                gi
            } else {
                gi + 1
            }
        }
    };
    Some((gi, start))
}

/// What a turn starts from (`runner.md` 7, `decisions.md` 47): the newest compaction in the
/// window with the inputs before it and everything after it; without one, every whole turn,
/// after the fixed note when the window does not reach the file's start. `Evicted` when items
/// it needs were freed (the window dropped the compaction that made them unneeded).
pub(super) fn snapshot(
    groups: &VecDeque<Group>,
    base: Base,
    whole: bool,
    records: u64,
) -> Result<Snapshot, HistoryError> {
    let mut s = Snapshot {
        records,
        ..Snapshot::default()
    };
    for g in groups {
        for f in &g.written.files {
            if !s.files.contains(f) {
                s.files.push(f.clone());
            }
        }
    }
    s.inputs = groups
        .iter()
        .filter(|g| g.turn && g.whole)
        .filter_map(|g| g.input.as_ref())
        .map(|(_, t)| t.clone())
        .collect();
    let (tokens, after) = usage(groups);
    s.last_input_tokens = tokens;
    s.bytes_since_usage = after;
    let items = |from: usize| -> Result<Vec<Item>, HistoryError> {
        let mut v = Vec::new();
        for g in groups.iter().skip(from) {
            v.extend_from_slice(g.items().ok_or(HistoryError::Evicted)?);
        }
        Ok(v)
    };
    let Some((gi, start)) = replay_start(groups, base) else {
        if whole {
            s.inputs_before = s.inputs.len();
        } else {
            s.summary = Some(LEFT_OUT_NOTE.to_owned());
        }
        s.after = items(0)?;
        return Ok(s);
    };
    let point = groups[gi].point().ok_or(HistoryError::Invalid)?;
    s.summary = Some(point.summary.clone());
    // The inputs before the turns the replay starts from.
    s.inputs_before = groups
        .iter()
        .take(start)
        .filter(|g| g.turn && g.whole && g.input.is_some())
        .count();
    let at_items = groups[gi].items().ok_or(HistoryError::Evicted)?;
    let at = point.item_at.min(at_items.len());
    if start <= gi {
        for g in groups.iter().skip(start).take(gi - start) {
            s.mid
                .extend_from_slice(g.items().ok_or(HistoryError::Evicted)?);
        }
        s.mid.extend_from_slice(&at_items[..at]);
        s.after = at_items[at..].to_vec();
        s.after.extend(items(gi + 1)?);
    } else {
        s.after = items(start)?;
    }
    Ok(s)
}

/// The last usage's input tokens (none after a compaction) and the stored bytes since.
fn usage(groups: &VecDeque<Group>) -> (Option<u64>, u64) {
    let mut after = 0u64;
    let mut reset = false;
    for g in groups.iter().rev() {
        after += g.usage.after;
        if g.usage.tokens.is_some() {
            return (
                (!reset && !g.usage.reset)
                    .then_some(g.usage.tokens)
                    .flatten(),
                after,
            );
        }
        reset |= g.usage.reset;
    }
    (None, after)
}

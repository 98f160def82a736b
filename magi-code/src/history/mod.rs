//! History: strict validation of stored JSONL into typed records, the summary that
//! discovery and reopen need, and the display projection (`docs/history-format.md`).

pub mod compact;
pub mod item;
pub mod meta;
pub mod projection;
pub mod record;
pub mod replay;
pub mod room;
pub mod shown;
pub mod state;
pub mod summary;
pub mod trust;
mod turn;
pub mod window;

pub use projection::{chunk, Projection, Projector};
pub use record::{ActivityKind, ActivityState, Body, HistoryError, Record, RunOutcome};
pub use replay::{Item, Replay, ToolSpec};
pub use state::History;
pub use summary::{Preferences, Summary};
pub use window::{Bounds, Window};

use crate::store::SessionId;

/// Most entries in one page.
pub const PAGE_ENTRIES: usize = protocol_core::limits::HISTORY_PAGE_ENTRIES;

/// Reads a whole history held in memory as a stored read does (tests, tools): its read
/// window, the first record beside it, the torn tail ignored; the state and its projection,
/// its replay closed as a stored conversation (a turn open in it was interrupted).
pub fn read_state(bytes: &[u8], id: &SessionId) -> Result<(History, Projection), HistoryError> {
    read_within(bytes, id, Bounds::READ)
}

/// [`read_state`] under other bounds than the protocol's.
pub fn read_within(
    bytes: &[u8],
    id: &SessionId,
    bounds: Bounds,
) -> Result<(History, Projection), HistoryError> {
    read_seeded(bytes, id, bounds, None)
}

/// [`read_within`] with derived metadata verified against `bytes` (`decisions.md` 50).
pub fn read_seeded(
    bytes: &[u8],
    id: &SessionId,
    bounds: Bounds,
    meta: Option<meta::Meta>,
) -> Result<(History, Projection), HistoryError> {
    let w = window::scan_bytes(bytes, bounds)?;
    let mut h = History::new(id, true);
    h.set_bounds(bounds);
    if let Some(m) = meta.filter(|_| !w.whole) {
        h.seed(m);
    }
    feed_at_hand(&mut h, bytes, bytes, 0, &w)?;
    h.close_open_turn();
    let p = h.project()?;
    Ok((h, p))
}

/// Feeds `h` the window `w` from bytes at hand: `head`, the file's first bytes (its first
/// record, read beside a window that does not reach it), and `tail`, the file's bytes from
/// offset `at` on, which hold the window. Ends the read.
pub fn feed_at_hand(
    h: &mut History,
    head: &[u8],
    tail: &[u8],
    at: u64,
    w: &Window,
) -> Result<(), HistoryError> {
    let ix = |o: u64| usize::try_from(o).unwrap_or(usize::MAX);
    if !w.whole {
        let first = window::first_record_end(head).ok_or(HistoryError::Invalid)?;
        h.line(&head[..ix(first) - 1])?;
        h.skip_to(w.start);
    }
    let body = tail
        .get(ix(w.start - at)..ix(w.end - at))
        .ok_or(HistoryError::Invalid)?;
    if !body.is_empty() {
        let mut trust = h.trust();
        for line in body[..body.len() - 1].split(|b| *b == b'\n') {
            h.line_trusted(line, &mut trust)?;
        }
    }
    h.finish_read(w.torn);
    Ok(())
}

/// Reads a whole history held in memory: its summary and projection.
pub fn read_bytes(bytes: &[u8], id: &SessionId) -> Result<(Summary, Projection), HistoryError> {
    let (h, p) = read_state(bytes, id)?;
    Ok((h.summary().clone(), p))
}

/// A display title: at most 256 input bytes, sanitized, cut to 50 characters; unsafe → None.
#[must_use]
pub fn display_title(raw: &str) -> Option<String> {
    if raw.len() > protocol_core::limits::DISCOVERY_TITLE_BYTES
        || raw.chars().any(char::is_control)
        || crate::util::redact::is_secret_like(raw)
    {
        return None;
    }
    let t: String = raw.trim().chars().take(50).collect();
    (!t.is_empty()).then_some(t)
}

#[cfg(test)]
mod tests;

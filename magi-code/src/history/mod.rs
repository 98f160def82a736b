//! History: strict validation of stored JSONL into typed records, the summary that
//! discovery and reopen need, and the display projection (`docs/history-format.md`).

pub mod compact;
pub mod item;
pub mod meta;
pub mod projection;
pub mod quick;
pub mod record;
pub mod replay;
pub mod room;
pub mod shown;
mod start;
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

/// The fuzz entry of stored-history reading (`fuzz/fuzz_targets/history.rs`): any bytes as a
/// history under small read bounds, as derived metadata, and line by line as records. Never
/// panics; checks what must hold whatever the bytes: the window is a suffix of whole lines
/// within the bounds, extending record by record equals a fresh read, the quick read of a line
/// equals the strict one, and metadata that parses writes the same bytes again.
pub fn fuzz(data: &[u8]) {
    let Some((&b, bytes)) = data.split_first() else {
        return;
    };
    let bounds = Bounds {
        bytes: 64 + u64::from(b) * 16,
        lines: 1 + usize::from(b % 16),
    };
    if let Ok(w) = window::scan_bytes(bytes, bounds) {
        assert!(w.start <= w.end && w.end <= bytes.len() as u64);
        assert!(w.whole == (w.start == 0));
        assert!(w.end == 0 || bytes[usize::try_from(w.end - 1).unwrap_or(0)] == b'\n');
        assert!(w.whole || w.end - w.start <= bounds.bytes);
    }
    for line in bytes.split(|c| *c == b'\n') {
        assert_eq!(quick::parse_trusted(line), Record::parse(line));
    }
    if let Some(m) = meta::Meta::parse(bytes, "s1") {
        let again = m.to_bytes().and_then(|b| meta::Meta::parse(&b, "s1"));
        assert_eq!(again, Some(m));
    }
    let id = SessionId::new("s1").unwrap_or_else(SessionId::generate);
    let Ok((_, fresh)) = read_within(bytes, &id, bounds) else {
        return;
    };
    let mut h = History::new(&id, true);
    h.set_bounds(bounds);
    let end = memchr::memrchr(b'\n', bytes).map_or(0, |i| i + 1);
    if end > 0 {
        for line in bytes[..end - 1].split(|c| *c == b'\n') {
            if h.line(line).is_err() {
                return;
            }
        }
    }
    h.finish_read(end < bytes.len());
    h.close_open_turn();
    assert_eq!(h.project().ok(), Some(fresh));
}

//! The read window of a stored history (`decisions.md` 47), sans-IO: the scan from the file's
//! end that says which whole lines are read (at most the read bound of them, plus the first
//! record). The reader feeds it the byte ranges it asks for and reads nothing else.

use super::record::HistoryError;

/// Bytes of one backward read.
const CHUNK: usize = 256 << 10;
/// Longest first record read beside a window that does not reach it.
pub const FIRST_RECORD_BYTES: u64 = 1 << 20;

/// The bounds of a read window: the stored bytes and lines read from the end, the first
/// record not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Most bytes (LF included).
    pub bytes: u64,
    /// Most lines.
    pub lines: usize,
}

impl Bounds {
    /// The protocol's stored-history read bound (64 MiB, 100,000 lines).
    pub const READ: Self = Self {
        bytes: protocol_core::limits::HISTORY_READ_BYTES,
        lines: protocol_core::limits::HISTORY_READ_LINES,
    };
}

/// Where a read window lies in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Offset of its first line: 0 when it reaches the file's start, else the first line of
    /// the counted part (the first record is then read beside it).
    pub start: u64,
    /// Offset just after its last LF: what the next append follows.
    pub end: u64,
    /// Whether it reaches the file's start (nothing is left out).
    pub whole: bool,
    /// Whether bytes without an LF follow `end` (an interrupted append, ignored).
    pub torn: bool,
    /// Lines counted against the bound (the first record excluded).
    pub lines: usize,
}

/// The backward scan: [`TailScan::want`] names the next range to read, [`TailScan::feed`]
/// takes its bytes, until [`TailScan::outcome`] is known. Reads at most the bound plus one
/// chunk and [`FIRST_RECORD_BYTES`].
#[derive(Debug)]
pub struct TailScan {
    len: u64,
    bounds: Bounds,
    /// Everything at and above it has been scanned.
    pos: u64,
    /// Just after the last LF, once found.
    end: Option<u64>,
    /// The oldest accepted line's start.
    start: u64,
    lines: usize,
    outcome: Option<Result<Window, HistoryError>>,
}

impl TailScan {
    /// The scan of a file of `len` bytes under `bounds`.
    #[must_use]
    pub fn new(len: u64, bounds: Bounds) -> Self {
        let mut s = Self {
            len,
            bounds,
            pos: len,
            end: None,
            start: len,
            lines: 0,
            outcome: None,
        };
        if len == 0 {
            s.reach_start();
        }
        s
    }

    /// The next range to read, `(offset, length)`, or `None` once the outcome is known.
    #[must_use]
    pub fn want(&self) -> Option<(u64, usize)> {
        if self.outcome.is_some() {
            return None;
        }
        let n = usize::try_from(self.pos.min(CHUNK as u64)).unwrap_or(CHUNK);
        Some((self.pos - n as u64, n))
    }

    /// Takes the bytes of the range [`Self::want`] named.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.outcome.is_some() {
            return;
        }
        let base = self.pos - chunk.len() as u64;
        let mut hi = chunk.len();
        while let Some(i) = memchr::memrchr(b'\n', &chunk[..hi]) {
            self.lf(base + i as u64);
            if self.outcome.is_some() {
                return;
            }
            hi = i;
        }
        self.pos = base;
        if self.pos == 0 {
            self.reach_start();
        } else if !self.may_go_on() {
            self.stop();
        }
    }

    /// The window, or `TooLarge` when not even the newest record fits the bound.
    #[must_use]
    pub const fn outcome(&self) -> Option<Result<Window, HistoryError>> {
        self.outcome
    }

    /// An LF at `p`: the first one found ends the window; each later one starts a line.
    fn lf(&mut self, p: u64) {
        let Some(end) = self.end else {
            self.end = Some(p + 1);
            self.start = p + 1;
            if self.len - (p + 1) > self.bounds.bytes {
                // The torn fragment after the last LF: no record of ours is that long.
                self.outcome = Some(Err(HistoryError::TooLarge));
            }
            return;
        };
        if end - (p + 1) <= self.bounds.bytes && self.lines < self.bounds.lines {
            self.start = p + 1;
            self.lines += 1;
        } else {
            self.stop();
        }
    }

    /// Whether the line being scanned may still be taken: as a counted line, or as the first
    /// record (not counted) if it turns out to start the file.
    fn may_go_on(&self) -> bool {
        match self.end {
            // The torn fragment after the last LF: no record of ours is that long.
            None => self.len - self.pos <= self.bounds.bytes,
            Some(end) => {
                let counted = end - self.pos <= self.bounds.bytes && self.lines < self.bounds.lines;
                counted || self.start - self.pos <= FIRST_RECORD_BYTES
            }
        }
    }

    /// Scanned down to the file's start: the line above is the first record.
    fn reach_start(&mut self) {
        let end = self.end.unwrap_or(0);
        self.outcome = Some(Ok(Window {
            start: 0,
            end,
            whole: true,
            torn: end < self.len,
            lines: self.lines,
        }));
    }

    /// The line being scanned does not fit: the window starts at the last accepted line.
    fn stop(&mut self) {
        self.outcome = Some(match self.end {
            Some(end) if self.lines > 0 => Ok(Window {
                start: self.start,
                end,
                whole: false,
                torn: end < self.len,
                lines: self.lines,
            }),
            _ => Err(HistoryError::TooLarge),
        });
    }

    /// Ends the scan where it stands (the bytes it wants are not at hand): the window is
    /// the lines accepted so far.
    pub fn give_up(&mut self) {
        if self.outcome.is_none() {
            self.stop();
        }
    }
}

/// Runs a [`TailScan`] over a file of `len` bytes of which only `tail`, from offset `at` to
/// the end, is at hand: the window lies within it (tests, fuzzing, discovery's newest bytes).
pub fn scan_tail(tail: &[u8], at: u64, len: u64, bounds: Bounds) -> Result<Window, HistoryError> {
    let mut s = TailScan::new(len, bounds);
    while let Some((from, n)) = s.want() {
        let to = from + n as u64;
        if to <= at || to > len || tail.len() as u64 != len - at {
            s.give_up();
            break;
        }
        // What of the range is at hand (a scan takes any shorter range ending where it is).
        let i = usize::try_from(from.max(at) - at).unwrap_or(usize::MAX);
        let j = usize::try_from(to - at).unwrap_or(usize::MAX);
        s.feed(&tail[i..j]);
    }
    s.outcome().unwrap_or(Err(HistoryError::Invalid))
}

/// Runs a [`TailScan`] over a whole file held in memory.
pub fn scan_bytes(bytes: &[u8], bounds: Bounds) -> Result<Window, HistoryError> {
    scan_tail(bytes, 0, bytes.len() as u64, bounds)
}

/// The end of the first record (just after its LF) within the first bytes of a file, if it is
/// there and at most [`FIRST_RECORD_BYTES`] long.
#[must_use]
pub fn first_record_end(head: &[u8]) -> Option<u64> {
    let n = head
        .len()
        .min(usize::try_from(FIRST_RECORD_BYTES).unwrap_or(usize::MAX));
    memchr::memchr(b'\n', &head[..n]).map(|i| i as u64 + 1)
}

#[cfg(test)]
mod tests;

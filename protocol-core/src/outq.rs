//! The bounded output queue: at most 32 frames, one contiguous byte buffer, each frame with
//! an absolute deadline from enqueue that partial writes never reset.

use crate::limits::{OUTPUT_DEADLINE_MS, OUTPUT_FRAME_BYTES, PENDING_OUTPUT_FRAMES};
use crate::time::Time;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy)]
struct Meta {
    end: u64,
    deadline: Time,
}

/// Why a push was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// The frame (LF included) exceeds 65,536 bytes.
    TooLarge,
    /// 32 frames are already pending.
    Overflow,
}

/// Pending output frames, written oldest first.
#[derive(Debug)]
pub struct OutQueue {
    buf: Vec<u8>,
    start: usize,
    frames: VecDeque<Meta>,
    pushed: u64,
    written: u64,
    next_seq: u64,
}

impl Default for OutQueue {
    fn default() -> Self {
        Self {
            buf: Vec::new(),
            start: 0,
            frames: VecDeque::new(),
            pushed: 0,
            written: 0,
            next_seq: 1,
        }
    }
}

impl OutQueue {
    /// An empty queue whose first frame gets `seq` 1.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The `seq` the next pushed frame gets.
    #[must_use]
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Frames not completely written.
    #[must_use]
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether every frame was written.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Encodes a frame with the next `seq` and queues it. The seq is consumed only on success.
    pub fn push(
        &mut self,
        now: Time,
        encode: impl FnOnce(u64, &mut Vec<u8>),
    ) -> Result<u64, PushError> {
        if self.frames.len() >= PENDING_OUTPUT_FRAMES {
            return Err(PushError::Overflow);
        }
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let before = self.buf.len();
        let seq = self.next_seq;
        encode(seq, &mut self.buf);
        self.buf.push(b'\n');
        let len = self.buf.len() - before;
        if len > OUTPUT_FRAME_BYTES {
            self.buf.truncate(before);
            return Err(PushError::TooLarge);
        }
        self.next_seq += 1;
        self.pushed += len as u64;
        self.frames.push_back(Meta {
            end: self.pushed,
            deadline: now.plus_ms(OUTPUT_DEADLINE_MS),
        });
        Ok(seq)
    }

    /// The unwritten bytes, oldest frame first (possibly several frames).
    #[must_use]
    pub fn pending(&self) -> Option<&[u8]> {
        (self.start < self.buf.len()).then(|| &self.buf[self.start..])
    }

    /// Records that the writer accepted `n` bytes of [`Self::pending`].
    pub fn written(&mut self, n: usize) {
        let n = n.min(self.buf.len() - self.start);
        self.start += n;
        self.written += n as u64;
        while self.frames.front().is_some_and(|f| f.end <= self.written) {
            self.frames.pop_front();
        }
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
            if self.buf.capacity() > 4 * OUTPUT_FRAME_BYTES {
                self.buf.shrink_to(OUTPUT_FRAME_BYTES);
            }
        }
    }

    /// The deadline of the oldest frame not completely written.
    #[must_use]
    pub fn oldest_deadline(&self) -> Option<Time> {
        self.frames.front().map(|f| f.deadline)
    }

    /// Drops every pending frame (the output is broken or stalled past its deadline).
    pub fn abandon(&mut self) {
        self.buf = Vec::new();
        self.start = 0;
        self.frames.clear();
        self.written = self.pushed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_writes_do_not_reset_deadline() {
        let mut q = OutQueue::new();
        q.push(Time(0), |_, b| b.extend_from_slice(b"abc")).unwrap();
        q.push(Time(10), |_, b| b.extend_from_slice(b"de")).unwrap();
        assert_eq!(q.pending(), Some(&b"abc\nde\n"[..]));
        q.written(2);
        assert_eq!(q.oldest_deadline(), Some(Time(2000)));
        q.written(2);
        assert_eq!(q.oldest_deadline(), Some(Time(2010)));
        assert_eq!(q.len(), 1);
        q.written(3);
        assert!(q.is_empty() && q.pending().is_none());
    }

    #[test]
    fn bounds() {
        let mut q = OutQueue::new();
        assert_eq!(
            q.push(Time(0), |_, b| b.resize(OUTPUT_FRAME_BYTES, b'x')),
            Err(PushError::TooLarge)
        );
        assert_eq!(
            q.push(Time(0), |_, b| b.resize(OUTPUT_FRAME_BYTES - 1, b'x')),
            Ok(1)
        );
        for i in 1..PENDING_OUTPUT_FRAMES {
            assert_eq!(q.push(Time(0), |_, b| b.push(b'x')), Ok(i as u64 + 1));
        }
        assert_eq!(
            q.push(Time(0), |_, b| b.push(b'x')),
            Err(PushError::Overflow)
        );
    }
}

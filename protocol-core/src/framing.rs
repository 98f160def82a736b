//! The line decoder: LF-terminated frames of at most 65,536 bytes, never buffering more.

use crate::limits::INPUT_FRAME_BYTES;
use std::ops::Range;

/// Where a complete line's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineAt {
    /// In the input slice just fed, at this range (LF excluded): no copy was made.
    Input(Range<usize>),
    /// In the decoder's buffer ([`LineDecoder::buffered`]); call [`LineDecoder::clear`] after use.
    Buffered,
}

/// What one [`LineDecoder::feed`] call found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameEvent {
    /// A complete line, LF excluded (a CR before the LF is kept: it is JSON whitespace).
    Line(LineAt),
    /// Byte 65,537 of one line arrived; the decoder must not be fed again.
    TooLarge,
}

/// The result of one [`LineDecoder::feed`] call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Feed {
    /// Input bytes consumed (including the LF of a returned line).
    pub consumed: usize,
    /// At most one event; `None` means every consumed byte went into the partial buffer.
    pub event: Option<FrameEvent>,
}

/// Splits a byte stream into lines, holding at most one partial frame.
#[derive(Debug, Default)]
pub struct LineDecoder {
    partial: Vec<u8>,
    poisoned: bool,
}

impl LineDecoder {
    /// A decoder with an empty buffer.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Consumes input up to and including the first complete line, or all of it.
    ///
    /// Oversize is reported on byte 65,537 of a line, without reading further.
    pub fn feed(&mut self, input: &[u8]) -> Feed {
        if self.poisoned {
            return Feed {
                consumed: 0,
                event: Some(FrameEvent::TooLarge),
            };
        }
        let room = INPUT_FRAME_BYTES - self.partial.len();
        match memchr::memchr(b'\n', input) {
            Some(lf) if lf <= room => {
                if self.partial.is_empty() {
                    Feed {
                        consumed: lf + 1,
                        event: Some(FrameEvent::Line(LineAt::Input(0..lf))),
                    }
                } else {
                    self.partial.extend_from_slice(&input[..lf]);
                    Feed {
                        consumed: lf + 1,
                        event: Some(FrameEvent::Line(LineAt::Buffered)),
                    }
                }
            }
            found => {
                let limit = found.unwrap_or(input.len());
                if limit > room {
                    // Byte 65,537 is at input[room]: consume through it and no further.
                    self.poisoned = true;
                    self.partial.clear();
                    Feed {
                        consumed: room + 1,
                        event: Some(FrameEvent::TooLarge),
                    }
                } else {
                    self.partial.extend_from_slice(input);
                    Feed {
                        consumed: input.len(),
                        event: None,
                    }
                }
            }
        }
    }

    /// The buffered line after [`LineAt::Buffered`], or the partial frame otherwise.
    #[must_use]
    pub fn buffered(&self) -> &[u8] {
        &self.partial
    }

    /// Drops the buffered line after it was handled.
    pub fn clear(&mut self) {
        self.partial.clear();
    }

    /// Bytes currently buffered.
    #[must_use]
    pub fn buffered_len(&self) -> usize {
        self.partial.len()
    }

    /// Called at EOF: whether an unterminated frame was pending. The bytes are discarded unparsed.
    pub fn finish(&mut self) -> bool {
        let had = !self.partial.is_empty();
        self.partial = Vec::new();
        had
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_line_is_accepted_and_one_more_byte_is_rejected() {
        let mut d = LineDecoder::new();
        let mut line = vec![b'a'; INPUT_FRAME_BYTES];
        line.push(b'\n');
        let f = d.feed(&line);
        assert_eq!(
            f.event,
            Some(FrameEvent::Line(LineAt::Input(0..INPUT_FRAME_BYTES)))
        );
        assert_eq!(f.consumed, INPUT_FRAME_BYTES + 1);

        let mut d = LineDecoder::new();
        let big = vec![b'a'; INPUT_FRAME_BYTES + 10];
        let f = d.feed(&big);
        assert_eq!(f.event, Some(FrameEvent::TooLarge));
        assert_eq!(f.consumed, INPUT_FRAME_BYTES + 1);
    }

    #[test]
    fn oversize_across_batches_is_detected_on_byte_65537() {
        let mut d = LineDecoder::new();
        let chunk = vec![b'x'; 4096];
        let mut total = 0;
        loop {
            let f = d.feed(&chunk);
            total += f.consumed;
            if f.event == Some(FrameEvent::TooLarge) {
                break;
            }
            assert!(d.buffered_len() <= INPUT_FRAME_BYTES);
        }
        assert_eq!(total, INPUT_FRAME_BYTES + 1);
    }

    #[test]
    fn cr_counts_toward_the_limit() {
        let mut d = LineDecoder::new();
        let mut line = vec![b' '; INPUT_FRAME_BYTES];
        line.extend_from_slice(b"\r\n");
        assert_eq!(d.feed(&line).event, Some(FrameEvent::TooLarge));
    }

    #[test]
    fn split_line_is_buffered_then_returned() {
        let mut d = LineDecoder::new();
        assert_eq!(d.feed(b"{\"a\"").event, None);
        let f = d.feed(b":1}\nrest");
        assert_eq!(f.event, Some(FrameEvent::Line(LineAt::Buffered)));
        assert_eq!(f.consumed, 4);
        assert_eq!(d.buffered(), b"{\"a\":1}");
        d.clear();
        assert_eq!(d.feed(b"rest").event, None);
        assert!(d.finish());
        assert!(!d.finish());
    }
}

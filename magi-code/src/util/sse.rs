//! A sans-IO decoder of server-sent events (the WHATWG rules): bytes in, dispatched events out,
//! every line bounded. Shared by the providers' streams and MCP's Streamable HTTP answers.

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with LF.
    pub data: String,
}

/// Longest line accepted (field name, value and all), without its line end.
pub const LINE_BYTES: usize = 1 << 20;

/// Why the byte stream is not SSE this decoder accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseError {
    /// A line over [`LINE_BYTES`], or one event's data over it.
    TooLong,
    /// A line that is not UTF-8.
    NotUtf8,
}

/// Feeds bytes, yields events: `data:` lines are joined with LF, `event:` names the event, a
/// blank line dispatches; comments, `id:`, `retry:` and unknown fields are ignored. CR, LF
/// and CRLF all end lines, also when split across feeds.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    /// The previous feed ended in CR: a leading LF of the next one belongs to it.
    after_cr: bool,
    event: Option<String>,
    data: Option<String>,
    failed: Option<SseError>,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next bytes; returns the events they complete, or the first error (sticky).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Err(e) = self.line_done(&line, &mut out) {
                        self.failed = Some(e);
                        return Err(e);
                    }
                }
                _ => {
                    if self.line.len() >= LINE_BYTES {
                        self.failed = Some(SseError::TooLong);
                        return Err(SseError::TooLong);
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(out)
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            if let Some(mut data) = self.data.take() {
                // Each data line added its value and an LF; the last LF is not part of it.
                data.pop();
                out.push(SseEvent {
                    event: self.event.take(),
                    data,
                });
            }
            self.event = None;
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                let data = self.data.get_or_insert_with(String::new);
                if data.len() + value.len() + 1 > LINE_BYTES {
                    return Err(SseError::TooLong);
                }
                data.push_str(value);
                data.push('\n');
            }
            "event" => self.event = Some(value.to_owned()),
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(bytes: &[u8]) -> Vec<SseEvent> {
        SseDecoder::new().feed(bytes).unwrap()
    }

    #[test]
    fn events_fields_and_line_ends() {
        let evs =
            all(b"event: a\ndata: 1\ndata:2\n\n: comment\r\ndata: x\r\n\r\nid: 3\ndata\n\n\n");
        assert_eq!(
            evs,
            [
                SseEvent {
                    event: Some("a".into()),
                    data: "1\n2".into()
                },
                SseEvent {
                    event: None,
                    data: "x".into()
                },
                SseEvent {
                    event: None,
                    data: String::new()
                },
            ]
        );
        // A blank line without data dispatches nothing, and resets the event name.
        assert_eq!(all(b"event: a\n\ndata: y\n\n")[0].event, None);
        // An event without its blank line is not dispatched.
        assert!(all(b"data: z\n").is_empty());
        // CR then LF in the next feed is one line end.
        let mut d = SseDecoder::new();
        assert!(d.feed(b"data: q\r").unwrap().is_empty());
        assert_eq!(d.feed(b"\n\r\n").unwrap().len(), 1);
    }

    #[test]
    fn lines_are_bounded() {
        let mut edge = b"data:".to_vec();
        edge.extend(std::iter::repeat_n(b'x', LINE_BYTES - 5));
        edge.extend(b"\n\n");
        assert_eq!(all(&edge)[0].data.len(), LINE_BYTES - 5);
        let mut over = b"data:".to_vec();
        over.extend(std::iter::repeat_n(b'x', LINE_BYTES - 4));
        let mut d = SseDecoder::new();
        assert_eq!(d.feed(&over), Err(SseError::TooLong));
        assert_eq!(d.feed(b"\n"), Err(SseError::TooLong), "sticky");
        assert_eq!(
            SseDecoder::new().feed(b"data: \xff\n"),
            Err(SseError::NotUtf8)
        );
    }
}

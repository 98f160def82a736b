//! A sans-IO decoder of server-sent events (the WHATWG rules): bytes in, dispatched events out,
//! every line bounded.

use super::model::SseEvent;

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

    /// Every fixture stream under `providers/fixtures/**`: (its folder, i.e. its wire API,
    /// and its bytes).
    fn fixtures() -> Vec<(String, Vec<u8>)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<(String, Vec<u8>)>) {
            let mut entries: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            for path in entries {
                if path.is_dir() {
                    walk(&path, out);
                } else {
                    let api = dir.file_name().unwrap().to_string_lossy().into_owned();
                    out.push((api, std::fs::read(&path).unwrap()));
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/providers/fixtures");
        let mut out = Vec::new();
        walk(&root, &mut out);
        assert!(!out.is_empty());
        out
    }

    /// The SSE events of `chunks` fed one by one.
    fn events(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        chunks.iter().flat_map(|c| d.feed(c).unwrap()).collect()
    }

    /// What the wire API's own decoder makes of `chunks`, where this test knows the API.
    fn model(api: &str, chunks: &[&[u8]]) -> Option<String> {
        match api {
            "anthropic" => Some(format!(
                "{:?}",
                super::super::fuzzing::decode_chunks(chunks)
            )),
            _ => None,
        }
    }

    /// `bytes` cut at the sorted, deduplicated `cuts`.
    fn pieces<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut out = Vec::new();
        let mut from = 0;
        for c in cuts {
            out.push(&bytes[from..c]);
            from = c;
        }
        out.push(&bytes[from..]);
        out
    }

    #[test]
    fn every_two_piece_split_decodes_like_one_feed() {
        for (api, bytes) in fixtures() {
            let whole = events(&[&bytes]);
            assert!(!whole.is_empty());
            let whole_model = model(&api, &[&bytes]);
            for at in 0..=bytes.len() {
                let (a, b) = bytes.split_at(at);
                assert_eq!(events(&[a, b]), whole, "{api} split at {at}");
                assert_eq!(model(&api, &[a, b]), whole_model, "{api} split at {at}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn random_splits_decode_like_one_feed(
            pick in proptest::prelude::any::<usize>(),
            cuts in proptest::collection::vec(proptest::prelude::any::<usize>(), 0..24),
        ) {
            let all = fixtures();
            let (api, bytes) = &all[pick % all.len()];
            let chunks = pieces(bytes, &cuts);
            proptest::prop_assert_eq!(events(&chunks), events(&[bytes]));
            proptest::prop_assert_eq!(model(api, &chunks), model(api, &[bytes]));
        }
    }
}

//! The SSE decoder the provider streams read through; it lives in `util/sse.rs` so that the
//! MCP Streamable HTTP transport (a lower layer) shares it.

pub use crate::util::sse::{SseDecoder, SseError, LINE_BYTES};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::sse::SseEvent;

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
                // The CLI's lines are JSONL, not an SSE stream (`claude_cli.rs` reads them).
                if path.ends_with("claude_cli") {
                    continue;
                }
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

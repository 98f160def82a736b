//! Entry points shared by the cargo-fuzz targets and the corpus-replay tests. Each asserts
//! the invariants that must hold for any input; a panic here is a bug.

use crate::framing::{FrameEvent, LineAt, LineDecoder};
use crate::limits::{
    INPUT_FRAME_BYTES, OUTPUT_FRAME_BYTES, PENDING_OUTPUT_FRAMES, READ_BATCH_BYTES,
};
use crate::sim::Sim;

/// Feeds `data` to a decoder in chunks whose sizes come from the data itself.
pub fn framing(data: &[u8]) {
    let mut d = LineDecoder::new();
    let mut rest = data;
    let mut step = 1usize;
    while !rest.is_empty() {
        let n = rest.len().min(step);
        let chunk = &rest[..n];
        let f = d.feed(chunk);
        assert!(f.consumed <= chunk.len());
        assert!(d.buffered_len() <= INPUT_FRAME_BYTES);
        match f.event {
            Some(FrameEvent::TooLarge) => return,
            Some(FrameEvent::Line(LineAt::Input(r))) => {
                assert!(r.end < f.consumed && chunk[r.end] == b'\n');
                assert!(!chunk[r.clone()].contains(&b'\n'));
            }
            Some(FrameEvent::Line(LineAt::Buffered)) => {
                assert!(!d.buffered().contains(&b'\n'));
                d.clear();
            }
            None => assert_eq!(f.consumed, chunk.len()),
        }
        rest = &rest[f.consumed..];
        step = step % 7919 + chunk.first().map_or(1, |b| *b as usize + 1);
    }
    d.finish();
}

/// Parses `data` as one line: never panics, and echoes an ID only when it is well-formed.
pub fn envelope(data: &[u8]) {
    if let Err(r) = crate::envelope::parse(data) {
        if let Some(id) = r.id {
            assert!(crate::ids::is_id_grammar(id.as_str()));
        }
    }
}

/// Drives a whole simulated child with `data` as client input (first byte picks the write
/// chunk, stalls and EOF) and checks the transport invariants.
pub fn engine(data: &[u8]) {
    let Some((&mode, input)) = data.split_first() else {
        return;
    };
    let mut sim = Sim::new();
    sim.write_chunk = 1 + (mode as usize % 5) * 1000;
    for chunk in input.chunks(READ_BATCH_BYTES + 13) {
        sim.send(chunk);
        if mode & 0x40 != 0 {
            sim.advance(700);
        }
        assert!(sim.max_buffered_input <= INPUT_FRAME_BYTES + READ_BATCH_BYTES);
        assert!(sim.max_queued <= PENDING_OUTPUT_FRAMES);
    }
    if mode & 0x80 != 0 {
        sim.close_input();
    }
    sim.advance(5_000);
    check_frames(&sim);
}

/// Every written frame is one JSON object within the output bound, and `seq` goes 1, 2, 3, …
pub fn check_frames(sim: &Sim) {
    for (expect, line) in (1u64..).zip(sim.lines()) {
        assert!(line.len() < OUTPUT_FRAME_BYTES);
        let v: serde_json::Value = serde_json::from_slice(line).expect("frames are JSON");
        assert_eq!(
            v["seq"].as_u64(),
            Some(expect),
            "seq strictly increases by one"
        );
        assert_eq!(v["instance_id"].as_str(), Some(sim.engine.instance_id()));
        let has_result = v.get("result").is_some();
        let has_error = v.get("error").is_some();
        if v["type"] == "response" {
            assert!(has_result != has_error, "exactly one of result/error");
            if has_error {
                assert_eq!(v["error"].as_object().map(serde_json::Map::len), Some(1));
            }
        }
    }
}

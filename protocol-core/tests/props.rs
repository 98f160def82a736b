//! Property tests over the simulated child.

use proptest::prelude::*;
use protocol_core::limits::{INPUT_FRAME_BYTES, READ_BATCH_BYTES};
use protocol_core::sim::{ready_view, request, Sim};
use protocol_core::WorkerEvent;
use serde_json::json;

/// Lines a client might send: valid requests, broken ones, duplicates.
fn line() -> impl Strategy<Value = Vec<u8>> {
    let id = "[a-z0-9]{1,4}";
    prop_oneof![
        id.prop_map(|i| request(&i, "status", &json!({}))),
        id.prop_map(|i| request(&i, "session.create", &json!({}))),
        id.prop_map(|i| request(
            &i,
            "initialize",
            &json!({"required_capabilities": ["status"]})
        )),
        id.prop_map(|i| request(&i, "bogus.method", &json!({}))),
        id.prop_map(|i| request(&i, "status", &json!({"x": 1}))),
        Just(b"\n".to_vec()),
        Just(b"{not json\n".to_vec()),
        Just(b"\xff\n".to_vec()),
        Just(b"[1,2]\r\n".to_vec()),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(|mut v| {
            v.retain(|b| *b != b'\n');
            v.push(b'\n');
            v
        }),
    ]
}

fn run(stream: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut s = Sim::new();
    s.auto_init = None;
    let mut last = 0;
    for &c in cuts {
        let c = c.min(stream.len()).max(last);
        s.send(&stream[last..c]);
        last = c;
    }
    s.send(&stream[last..]);
    s.worker(WorkerEvent::InitReady { view: ready_view() });
    protocol_core::fuzzing::check_frames(&s);
    s.out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_split_gives_the_same_output(lines in prop::collection::vec(line(), 1..40), mut cuts in prop::collection::vec(0usize..4000, 0..20)) {
        let stream: Vec<u8> = lines.concat();
        cuts.sort_unstable();
        let whole = run(&stream, &[]);
        let split = run(&stream, &cuts);
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn arbitrary_bytes_keep_every_bound(data in prop::collection::vec(any::<u8>(), 0..20_000), mode in any::<u8>()) {
        let mut input = vec![mode];
        input.extend_from_slice(&data);
        protocol_core::fuzzing::engine(&input);
    }

    #[test]
    fn long_lines_never_buffer_more_than_one_frame_and_one_batch(len in 60_000usize..70_000, chunk in 1usize..9000) {
        let mut s = Sim::new();
        let data = vec![b'a'; len];
        for c in data.chunks(chunk) {
            s.send(c);
        }
        prop_assert!(s.max_buffered_input <= INPUT_FRAME_BYTES + READ_BATCH_BYTES);
        prop_assert_eq!(s.exit.is_some(), len > INPUT_FRAME_BYTES);
    }
}

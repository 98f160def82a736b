//! Measures engine-only throughput of pipelined `status` (no pipes): a profiling aid.
#![allow(clippy::disallowed_methods)] // A measurement tool: it reads the clock, the engine does not.
use protocol_core::sim::{request, Sim};
use serde_json::json;
use std::time::Instant;

fn main() {
    let mut batch = Vec::new();
    for i in 0..4000 {
        batch.extend_from_slice(&request(&format!("s{i}"), "status", &json!({})));
    }
    let mut best = f64::MAX;
    for _ in 0..20 {
        let mut s = Sim::new();
        s.send(&request(
            "init",
            "initialize",
            &json!({"required_capabilities": []}),
        ));
        let t = Instant::now();
        s.send(&batch);
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(s.lines().len(), 4001);
    }
    println!(
        "engine: {:.0} status/s ({:.3} µs each)",
        4000.0 / best,
        best * 1e6 / 4000.0
    );
    let t = Instant::now();
    for _ in 0..20 {
        for l in batch.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: serde_json::Value = serde_json::from_slice(l).unwrap();
            std::hint::black_box(v);
        }
    }
    println!(
        "plain serde_json Value parse: {:.3} µs each",
        t.elapsed().as_secs_f64() * 1e6 / 80000.0
    );
}

//! `magi-code replay FILE`: a captured trace replayed through the engine.

/// Replays a trace file through the engine and prints the differences.
pub fn replay(path: &std::path::Path) -> i32 {
    let Ok(text) = std::fs::read_to_string(path) else {
        eprintln!("magi-code replay: cannot read the trace file");
        return 2;
    };
    let report = protocol_core::trace::replay(&text);
    for m in &report.mismatches {
        println!("line {}: {}", m.line, m.what);
    }
    println!(
        "{} records, {} children, {} mismatches",
        report.records,
        report.children,
        report.mismatches.len()
    );
    i32::from(!report.mismatches.is_empty())
}

//! `magi-code replay FILE`: a captured trace replayed through the engine.

/// Replays a trace file through the engine and prints the differences.
pub fn replay(path: &std::path::Path) -> i32 {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            // The user's own argument, said back so they see which file it was.
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => "not found",
                std::io::ErrorKind::PermissionDenied => "permission denied",
                _ => "not a readable file",
            };
            eprintln!("magi-code replay: cannot read {}: {why}", path.display());
            return 2;
        }
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

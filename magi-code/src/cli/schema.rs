//! `magi-code schema`: the contract this binary speaks, so a frontend can pin the schema to
//! the binary it spawns.

use std::io::Write;

/// Prints the JSON Schema, or with `typescript` the TypeScript declarations; exit code.
#[must_use]
pub fn schema(typescript: bool) -> i32 {
    let text = if typescript {
        crate::wire::typescript()
    } else {
        crate::wire::schema_text()
    };
    let mut out = std::io::stdout().lock();
    if out
        .write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_ok()
    {
        0
    } else {
        1
    }
}

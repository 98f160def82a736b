//! The TypeScript client of `clients/typescript/` against this build's binary: its pinned
//! packages installed (`npm ci`, once, locked), `npm run build` (the pinned compiler, strict,
//! over the committed `docs/schema/protocol.d.ts`), then `npm test` (`node --test`), whose
//! tests drive the guide's whole exchange, the FIFO transport and the failure paths through
//! the real child named by `MAGI_CODE_BIN`. A missing node or npm fails, never skips.

use crate::common::npm::ensure_npm;
use std::path::{Path, PathBuf};
use std::process::Command;

fn package() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/typescript")
}

/// Runs `npm run <script>` in the package and panics with its output unless it succeeds.
fn npm_run(dir: &Path, script: &str) {
    let out = Command::new("npm")
        .args(["run", "--silent", script])
        .current_dir(dir)
        .env("MAGI_CODE_BIN", env!("CARGO_BIN_EXE_magi-code"))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run npm ({e}): the TypeScript client needs node and npm")
        });
    assert!(
        out.status.success(),
        "`npm run {script}` in {} failed ({}):\n{}\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_typescript_client_builds_and_drives_the_real_binary() {
    let dir = package();
    ensure_npm(&dir, "node_modules/typescript/bin/tsc");
    npm_run(&dir, "build");
    npm_run(&dir, "test");
}

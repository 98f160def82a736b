//! The npm packages a test runs (pinned by a fixture folder's `package-lock.json`), installed by
//! the test itself so that `cargo test --locked --workspace` alone passes on a fresh clone.
//! Shared by the `stdio` and `backend` test binaries (each includes this file by `#[path]`).
//!
//! An install is `npm ci --no-audit --no-fund` in the folder, run at most once per process and
//! under an exclusive lock on `<folder>/.npm-ci.lock`, so concurrent test processes install one
//! after the other and the later ones find it done. It counts as done when
//! `node_modules/.magi-installed` holds the lockfile's sha256: a changed lockfile reinstalls.
//! A missing node or npm, or a failing `npm ci`, fails the test; nothing is skipped.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Written into `node_modules` after a successful install; holds the lockfile's sha256.
const MARKER: &str = ".magi-installed";

/// `dir/entry` (a file inside `dir/node_modules`), after installing `dir`'s pinned packages
/// if they are missing or older than its `package-lock.json`. Panics with the reason if not.
pub fn ensure_npm(dir: &Path, entry: &str) -> PathBuf {
    static DONE: OnceLock<Mutex<HashMap<PathBuf, Result<(), String>>>> = OnceLock::new();
    let done = DONE.get_or_init(Default::default);
    // Held across the install so the process's other test threads wait for it instead of
    // starting their own; a failure is remembered so it is reported, not retried, by each.
    let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
    let outcome = done
        .entry(dir.to_path_buf())
        .or_insert_with(|| install(dir))
        .clone();
    drop(done);
    if let Err(why) = outcome {
        panic!("{why}");
    }
    let path = dir.join(entry);
    assert!(
        path.is_file(),
        "{} missing after `npm ci` in {}",
        path.display(),
        dir.display()
    );
    path
}

/// Installs `dir`'s packages under the cross-process lock unless the marker says they are
/// current.
fn install(dir: &Path) -> Result<(), String> {
    node_runs()?;
    let lockfile = dir.join("package-lock.json");
    let pinned = fs::read(&lockfile).map_err(|e| format!("{}: {e}", lockfile.display()))?;
    let sum: String = Sha256::digest(&pinned)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let lock_path = dir.join(".npm-ci.lock");
    let lock = File::create(&lock_path).map_err(|e| format!("{}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    let marker = dir.join("node_modules").join(MARKER);
    // Another process may have installed while this one waited for the lock.
    if fs::read_to_string(&marker).is_ok_and(|m| m.trim() == sum) {
        return Ok(());
    }
    eprintln!("installing the npm packages of {} (npm ci)", dir.display());
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .output()
        .map_err(|e| {
            format!(
                "cannot run npm ({e}): the tests need node and npm to install {}",
                dir.display()
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "`npm ci --no-audit --no-fund` in {} failed ({}):\n{}\n{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // A lockfile without packages leaves no `node_modules` behind. `lock` is released on
    // return, after the marker is written: a process waiting for it then finds the marker.
    fs::create_dir_all(dir.join("node_modules"))
        .and_then(|()| fs::write(&marker, &sum))
        .map_err(|e| format!("{}: {e}", marker.display()))
}

/// Ok when `node --version` runs, else the reason the npm-backed tests cannot.
fn node_runs() -> Result<(), String> {
    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!("`node --version` failed: {}", out.status)),
        Err(e) => Err(format!(
            "cannot run node ({e}): the tests that use the pinned npm packages need it"
        )),
    }
}

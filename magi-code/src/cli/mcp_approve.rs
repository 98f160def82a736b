//! `magi-code mcp approve <name>` (`decisions.md` 41): prints the canonical definition and its
//! hash, asks `Approve? [y/N]` on a terminal, and on `y` or `yes` adds the hash to the global
//! `mcp.approved` (an atomic rewrite of `MC_HOME/settings.json` keeping every other key). Any
//! other answer, EOF, or no terminal on stdin changes nothing and exits 1. Secret-named `env`
//! and `headers` values print as `[redacted]` (`decisions.md` 53).

use crate::config::settings;
use crate::store::{replace_atomically, Sweep};
use serde_json::{Map, Value};
use std::io::{BufRead, IsTerminal, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// The server being approved, as the merged settings define it.
pub(super) struct Candidate<'a> {
    /// Its name.
    pub(super) name: &'a str,
    /// Its canonical definition.
    pub(super) canonical: &'a str,
    /// The lowercase hex SHA-256 of `canonical`.
    pub(super) hash: &'a str,
    /// Whether the global `mcp.approved` lists `hash` already.
    pub(super) approved: bool,
}

/// Runs `approve` for `def`, writing under `root` (`MC_HOME`); the exit code.
pub(super) fn approve(root: &Path, def: &Candidate<'_>) -> i32 {
    println!("{}", shown(def.canonical));
    println!("sha256 {}", def.hash);
    if def.approved {
        println!("{} is already approved.", def.name);
        return 0;
    }
    if !std::io::stdin().is_terminal() {
        eprintln!(
            "magi-code mcp: approve asks on a terminal; nothing was changed (mcp_not_approved)"
        );
        return 1;
    }
    print!("Approve? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let read = std::io::stdin().lock().read_line(&mut answer);
    let yes = read.is_ok_and(|n| n > 0)
        && matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes");
    if !yes {
        println!("Not approved; nothing was changed.");
        return 1;
    }
    match add_approval(root, def.hash) {
        Ok(()) => {
            println!(
                "Approved {} in {}.",
                def.name,
                settings_path(root).display()
            );
            0
        }
        Err(code) => {
            eprintln!("magi-code mcp: the global settings could not be written ({code})");
            1
        }
    }
}

/// Names whose `env` or `headers` values are never printed (`decisions.md` 53), any case.
const SECRET_NAMES: [&str; 5] = ["KEY", "SECRET", "TOKEN", "PASSWORD", "AUTH"];

/// The canonical definition as printed: a value under an `env` or `headers` name that holds
/// one of [`SECRET_NAMES`] reads `[redacted]` (the hash stays that of the real bytes).
fn shown(canonical: &str) -> String {
    let Ok(Value::Object(mut def)) = serde_json::from_str::<Value>(canonical) else {
        return canonical.to_owned();
    };
    for member in ["env", "headers"] {
        if let Some(Value::Object(vars)) = def.get_mut(member) {
            for (name, value) in vars.iter_mut() {
                let upper = name.to_ascii_uppercase();
                if SECRET_NAMES.iter().any(|s| upper.contains(s)) {
                    *value = Value::String("[redacted]".into());
                }
            }
        }
    }
    Value::Object(def).to_string()
}

fn settings_path(root: &Path) -> std::path::PathBuf {
    root.join("settings.json")
}

/// Re-reads the global settings and writes them back with `hash` in `mcp.approved`.
fn add_approval(root: &Path, hash: &str) -> Result<(), &'static str> {
    let path = settings_path(root);
    let mut global = settings::read_file(&path)
        .map_err(|_| "configuration_invalid")?
        .unwrap_or_default();
    let mcp = global
        .entry("mcp")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or("configuration_invalid")?;
    let approved = mcp
        .entry("approved")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or("configuration_invalid")?;
    if !approved.iter().any(|v| v.as_str() == Some(hash)) {
        approved.push(Value::String(hash.to_owned()));
    }
    let mut data = serde_json::to_vec_pretty(&global).map_err(|_| "settings_unwritable")?;
    data.push(b'\n');
    // The file keeps its permissions; a new one is owner-only, as MC_HOME is.
    let mode = std::fs::metadata(&path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o600);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(|_| "settings_unwritable")?;
    replace_atomically(&path, &data, Some(mode), Sweep::Beside)
        .map(|_| ())
        .map_err(|_| "settings_unwritable")
}

//! In-process tests of the backend's domain code, run against temporary directories, and the
//! tidy test of `src`'s layout.

mod append_path;
mod fn_length;
mod frames;
mod fuzz_corpus;
mod incremental;
mod layering;
#[path = "../support/npm.rs"]
mod npm;
mod repo;
mod schema;
mod settings_doc;
mod tidy;
mod typescript;

use magi_code::{config::Settings, runtime::Runtime};
use std::path::Path;

/// The admitted runtime of a child whose storage root is `home` and whose cwd is `cwd`, with
/// default settings (creates `home/sessions`).
fn runtime(home: &Path, cwd: &Path) -> Runtime {
    std::fs::create_dir_all(home.join("sessions")).unwrap();
    Runtime {
        root: std::fs::canonicalize(home).unwrap(),
        cwd: std::fs::canonicalize(cwd).unwrap(),
        settings: Settings::default(),
        context_id: "0".repeat(64),
        instructions: String::new(),
        client_tools: Vec::new(),
        tool_cards: false,
        tool_details: false,
        profiles: Vec::new(),
        skills: Vec::new(),
    }
}

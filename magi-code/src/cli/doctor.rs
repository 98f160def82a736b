//! `magi-code doctor`: prints each problem `initialize` would meet, with its file, key and fix
//! (`startup::doctor`); exit 0 when it would be `ready`, 1 otherwise. `--json` prints the same
//! findings (and the notes) as one JSON array for frontends (`docs/frontend-guide.md`).

use crate::startup::doctor::{check, notes, Finding};
use crate::startup::LaunchEnv;
use std::io::Write as _;

/// Checks the real launch environment and prints the findings (as JSON when `json`); the
/// exit code.
#[must_use]
pub fn doctor(json: bool) -> i32 {
    let env = LaunchEnv::from_process();
    let findings = check(&env);
    let code = i32::from(!findings.is_empty());
    let mut out = std::io::stdout();
    if json {
        let all: Vec<Finding> = findings.into_iter().chain(notes(&env)).collect();
        let text = serde_json::to_string(&all).unwrap_or_else(|_| "[]".to_owned());
        drop(writeln!(out, "{text}"));
        return code;
    }
    print(&findings, &mut out);
    for n in notes(&env) {
        drop(writeln!(out, "note: {n}"));
    }
    if findings.is_empty() {
        println!("magi-code doctor: no problem found; initialize would be ready");
    }
    code
}

/// Prints `findings` one a line (chat prints them after a failed startup too).
pub fn print(findings: &[Finding], out: &mut dyn std::io::Write) {
    for f in findings {
        // A closed output leaves nobody to tell.
        drop(writeln!(out, "{f}"));
    }
}

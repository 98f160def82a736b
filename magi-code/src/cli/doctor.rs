//! `magi-code doctor`: prints each problem `initialize` would meet, with its file, key and fix
//! (`startup::doctor`); exit 0 when it would be `ready`, 1 otherwise.

use crate::startup::doctor::{check, notes, Finding};
use crate::startup::LaunchEnv;
use std::io::Write as _;

/// Checks the real launch environment and prints the findings; the exit code.
#[must_use]
pub fn doctor() -> i32 {
    let env = LaunchEnv::from_process();
    let findings = check(&env);
    let mut out = std::io::stdout();
    print(&findings, &mut out);
    for n in notes(&env) {
        drop(writeln!(out, "note: {n}"));
    }
    if findings.is_empty() {
        println!("magi-code doctor: no problem found; initialize would be ready");
        return 0;
    }
    1
}

/// Prints `findings` one a line (chat prints them after a failed startup too).
pub fn print(findings: &[Finding], out: &mut dyn std::io::Write) {
    for f in findings {
        // A closed output leaves nobody to tell.
        drop(writeln!(out, "{f}"));
    }
}

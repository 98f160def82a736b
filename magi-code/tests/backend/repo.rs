//! The repository's own promises, checked by the README's test command itself (so `.ci/run`
//! needs no steps of its own): the README's two set-up commands, `.ci/run` running exactly the
//! second, and the formatting, lint and doc checks every change must pass.
//!
//! The lints run in `target/lint`, a build folder of their own: the outer `cargo test` holds
//! the lock of the default one while its tests run.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is inside the workspace")
        .to_path_buf()
}

/// The bodies of the fenced `sh` blocks before the README's first `##` heading.
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let top = readme.split("\n## ").next().unwrap();
    let mut blocks = Vec::new();
    let mut open: Option<Vec<&str>> = None;
    for line in top.lines() {
        match (&mut open, line.trim_end()) {
            (None, "```sh") => open = Some(Vec::new()),
            (Some(body), "```") => {
                blocks.push(body.join("\n"));
                open = None;
            }
            (Some(body), l) => body.push(l),
            (None, _) => {}
        }
    }
    assert!(open.is_none(), "an unclosed code block at the README's top");
    blocks
}

#[test]
fn the_readme_has_two_set_up_commands_and_ci_runs_exactly_the_second() {
    let cmds = readme_commands();
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    assert!(cmds[0].contains("MC_HOME=\"$(mktemp -d)\""), "{}", cmds[0]);
    assert!(cmds[0].contains("-- chat"), "{}", cmds[0]);
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    // Everything but comments, the shell's options and the move to the root is a step.
    let steps: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| !l.starts_with("set -") && !l.starts_with("cd "))
        .collect();
    assert_eq!(
        steps,
        [cmds[1].trim()],
        ".ci/run must run the README's test command alone"
    );
}

/// Runs `cargo ARGS` at the repository's root and fails with its output unless it succeeds.
fn cargo(args: &[&str], envs: &[(&str, &str)]) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(args)
        .envs(envs.iter().copied())
        .env("CARGO_TARGET_DIR", repo().join("target/lint"))
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo {args:?}: {e}"));
    assert!(
        out.status.success(),
        "cargo {args:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_code_is_formatted() {
    cargo(&["fmt", "--all", "--", "--check"], &[]);
}

#[test]
fn clippy_finds_nothing_and_the_docs_build_without_warnings() {
    // One after the other: both build into `target/lint`, and a second cargo would wait.
    cargo(
        &[
            "clippy",
            "--locked",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    );
    cargo(
        &["doc", "--locked", "--no-deps", "--workspace", "-q"],
        &[("RUSTDOCFLAGS", "-Dwarnings")],
    );
}

#[test]
fn cargo_install_installs_one_binary() {
    // `cargo install --path magi-code` installs every bin target of the package: exactly one,
    // `magi-code` (bench helpers are bench targets, never installed).
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bins: Vec<(&str, &str)> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let name = p["name"].as_str().unwrap();
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
                .map(move |t| (name, t["name"].as_str().unwrap()))
        })
        .collect();
    assert_eq!(bins, [("magi-code", "magi-code")]);
}

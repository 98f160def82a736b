//! Search benchmark (`backend.md` "Tools and approvals"): the `grep` and `glob` tools against
//! ripgrep on the same generated tree in the same run. The tree is a git repository of
//! 10,000 source files whose `.gitignore` lists `node_modules/` and `dist/`, with 400 planted
//! lines in those folders and 2 in real sources. Prints, for each, the median time of 5 runs
//! (the tool's from its call to its result, in a child of this bench; `rg`'s from spawn to
//! exit), the peak resident memory of that child and of `rg`, the ratio, and the lines from
//! ignored folders (0 is the target; the ratio's target is at most 1.5).
//!
//! `rg` is taken from `PATH`, else built once into `target/bench-tools` with `cargo install
//! ripgrep --locked` (the package registry is reachable where this runs).
//!
//! Run: `cargo bench -p magi-code --bench search`.

use magi_code::tools::{run, Builtin};
use magi_code::util::cancel::Cancel;
use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const NEEDLE: &str = "PLANTED_NEEDLE";
const SOURCES: usize = 10_000;
const RUNS: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("search-child") {
        return child(&args[2], Path::new(&args[3]));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    tree(root);
    let rg = ripgrep();
    println!("tree: {SOURCES} sources, 200 ignored files with 400 planted lines, 2 real ones");
    println!("| search | tool ms | rg ms | ratio | tool peak RSS | rg peak RSS | ignored lines |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let (grep_rows, grep_ms, grep_rss) = tool_runs("grep", root);
    let (rg_out, rg_ms, rg_rss) = rg_runs(&rg, &["-n", NEEDLE], root);
    row(
        "grep",
        (&grep_rows, grep_ms, grep_rss),
        (&rg_out, rg_ms, rg_rss),
    );
    let (glob_rows, glob_ms, glob_rss) = tool_runs("glob", root);
    let (files, files_ms, files_rss) = rg_runs(&rg, &["--files", "-g", "*.rs"], root);
    row(
        "glob *.rs",
        (&glob_rows, glob_ms, glob_rss),
        (&files, files_ms, files_rss),
    );
}

/// One table row, with the lines compared.
fn row(what: &str, tool: (&[String], f64, u64), rg: (&[String], f64, u64)) {
    let ignored = tool
        .0
        .iter()
        .filter(|l| l.starts_with("node_modules/") || l.starts_with("dist/"))
        .count();
    // The tool shows at most its bound, then a line counting the rest.
    let shown = tool.0.iter().filter(|l| !l.starts_with('[')).count();
    let more: usize = tool
        .0
        .iter()
        .filter_map(|l| {
            l.strip_prefix('[')?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum();
    let agree = if shown + more == rg.0.len() {
        ""
    } else {
        " (line counts differ)"
    };
    println!(
        "| {what} | {:.1} | {:.1} | {:.2}x | {} KiB | {} KiB | {ignored}{agree} |",
        tool.1,
        rg.1,
        tool.1 / rg.1,
        tool.2,
        rg.2,
    );
}

/// The generated tree: sources of ~40 lines, 2 of them with the needle; the ignored folders
/// with 400 needles.
fn tree(root: &Path) {
    fs::create_dir_all(root.join(".git")).unwrap();
    fs::write(root.join(".gitignore"), "node_modules/\ndist/\n").unwrap();
    let body: String = (0..40)
        .map(|i| format!("    let value_{i} = compute(input, {i}); // some ordinary code\n"))
        .collect();
    for i in 0..SOURCES {
        let path = root.join(format!("src/m{}/s{}/f{i}.rs", i % 50, i % 7));
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let planted = if i == 17 || i == 9_001 {
            format!("// {NEEDLE}\n")
        } else {
            String::new()
        };
        fs::write(path, format!("fn f{i}() {{\n{body}{planted}}}\n")).unwrap();
    }
    for i in 0..200 {
        let dir = if i % 2 == 0 { "node_modules" } else { "dist" };
        let path = root.join(format!("{dir}/p{i}/index.js"));
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, format!("{NEEDLE}\n{body}{NEEDLE}\n")).unwrap();
    }
}

/// In the child: runs the tool once, prints its time from call to result, then its output.
fn child(which: &str, root: &Path) {
    let (tool, input) = match which {
        "grep" => (Builtin::Grep, json!({"pattern": NEEDLE})),
        _ => (Builtin::Glob, json!({"pattern": "*.rs"})),
    };
    let t0 = Instant::now();
    let o = run(tool, &input, root, &Cancel::default());
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    assert!(o.ok, "{}", o.summary);
    println!("{ms}");
    print!("{}", o.output);
}

/// The tool's lines, median time and peak RSS over [`RUNS`] children.
fn tool_runs(which: &str, root: &Path) -> (Vec<String>, f64, u64) {
    let exe = std::env::current_exe().unwrap();
    let mut times = Vec::new();
    let mut rss = 0;
    let mut lines = Vec::new();
    for _ in 0..RUNS {
        let (out, peak, _) = measured(Command::new(&exe).args(["search-child", which]).arg(root));
        let mut it = out.lines().map(str::to_owned);
        times.push(it.next().unwrap().parse::<f64>().unwrap());
        lines = it.collect();
        rss = rss.max(peak);
    }
    (lines, median(times), rss)
}

/// `rg`'s lines, median time and peak RSS over [`RUNS`] runs.
fn rg_runs(rg: &Path, args: &[&str], root: &Path) -> (Vec<String>, f64, u64) {
    let mut times = Vec::new();
    let mut rss = 0;
    let mut lines = Vec::new();
    for _ in 0..RUNS {
        let (out, peak, ms) = measured(Command::new(rg).args(args).current_dir(root));
        times.push(ms);
        lines = out.lines().map(str::to_owned).collect();
        rss = rss.max(peak);
    }
    (lines, median(times), rss)
}

/// Runs `cmd` to its end: stdout, peak RSS (KiB, from `wait4`) and wall time (ms).
// `wait4` reaps the child (for its rusage), so `Child::wait` is never called.
#[allow(unsafe_code, clippy::zombie_processes)]
fn measured(cmd: &mut Command) -> (String, u64, f64) {
    let t0 = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child, reaped here.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our unreaped child; the pointers are to live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(r, pid);
    (out, u64::try_from(usage.ru_maxrss).unwrap_or(0), ms)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `rg` on `PATH`, else built once under `target/bench-tools`.
fn ripgrep() -> PathBuf {
    if Command::new("rg")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return PathBuf::from("rg");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-tools");
    let rg = root.join("bin/rg");
    if !rg.exists() {
        eprintln!("building ripgrep into {} (once)", root.display());
        let ok = Command::new(env!("CARGO"))
            .args(["install", "ripgrep", "--locked", "--root"])
            .arg(&root)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cargo install ripgrep failed: the benchmark needs rg");
    }
    rg
}

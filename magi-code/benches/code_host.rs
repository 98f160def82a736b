//! Code Mode helper benchmark (`code-mode.md` 7): prints
//!
//! - helper start plus a first cell `return 1` (median of 30 fresh helpers), beside the floor
//!   of spawning the same executable for `--version`;
//! - a later cell `return 1` on a warm helper (median of 300);
//! - a later cell making one nested call, less the same cell making none;
//! - the helper's peak resident memory (`VmHWM`) after those cells and after a 64 MiB cell.
//!
//! Run: `cargo bench -p magi-code --bench code_host`.

use magi_code::codemode::helper::Helper;
use magi_code::codemode::protocol::{CallAnswer, Cell, CellState, ToolInfo};
use magi_code::util::env::{child_env, BUILTIN_KEY_VARS};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_magi-code");

fn cell(code: &str, memory_mib: u64) -> Cell {
    Cell {
        id: "bench".into(),
        code: code.into(),
        tools: vec![ToolInfo {
            name: "echo".into(),
            description: "echo".into(),
            declaration: "echo(input: {}): Promise<string>".into(),
        }],
        cpu_ms: 10_000,
        memory_mib,
        max_calls: 200,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn run(h: &mut Helper, c: &Cell) {
    let end = h.run_cell(c, &mut |_| CallAnswer::Output("x".into()), &mut || None);
    assert_eq!(end.state, CellState::Completed, "{}", end.output);
}

fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM")
}

fn main() {
    let env = child_env(std::env::vars_os(), &BUILTIN_KEY_VARS, &[]);
    let one = cell("return 1", 64);
    let floor = median(
        (0..30)
            .map(|_| {
                let t = Instant::now();
                let st = Command::new(EXE)
                    .arg("--version")
                    .stdout(Stdio::null())
                    .status()
                    .expect("floor");
                assert!(st.success());
                t.elapsed()
            })
            .collect(),
    );
    let first = median(
        (0..30)
            .map(|_| {
                let t = Instant::now();
                let mut h = Helper::start_exe(Path::new(EXE), &env).expect("start");
                run(&mut h, &one);
                t.elapsed()
            })
            .collect(),
    );
    let mut h = Helper::start_exe(Path::new(EXE), &env).expect("start");
    let time = |h: &mut Helper, c: &Cell| {
        median(
            (0..300)
                .map(|_| {
                    let t = Instant::now();
                    run(h, c);
                    t.elapsed()
                })
                .collect(),
        )
    };
    let later = time(&mut h, &one);
    let with_call = time(&mut h, &cell("return await tools.echo({})", 64));
    let hwm_small = vm_hwm_kib(h.pid());
    run(
        &mut h,
        &cell("const a = []; try { while (true) a.push('x'.repeat(65536) + a.length); } catch (e) {} return a.length", 64),
    );
    let hwm_big = vm_hwm_kib(h.pid());
    println!("| measure | value |");
    println!("| --- | --- |");
    println!(
        "| spawn `magi-code --version` (floor) | {:.2} ms |",
        ms(floor)
    );
    println!(
        "| helper start + first cell `return 1` | {:.2} ms |",
        ms(first)
    );
    println!("| later cell `return 1` | {:.3} ms |", ms(later));
    println!(
        "| later cell with one nested call, less one without | {:.3} ms |",
        ms(with_call.saturating_sub(later))
    );
    println!("| helper VmHWM after 600 small cells | {} KiB |", hwm_small);
    println!(
        "| helper VmHWM after a cell filling 64 MiB | {} KiB |",
        hwm_big
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

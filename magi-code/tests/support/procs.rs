//! What `/proc` tells of the processes a test or benchmark started: a process's children, the
//! `code-host` helpers among them, whether one is alive, and how much they have read. Shared
//! by the `stdio` tests and the benchmarks (each includes this file by `#[path]`).
#![allow(dead_code)]

/// The children of process `pid` (every thread's).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// The `code-host` children of process `pid`.
pub fn helpers(pid: u32) -> Vec<u32> {
    children(pid)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(b"code-host"))
        })
        .collect()
}

/// Whether `pid` is a live (not zombie) process.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// The bytes `pids` have read so far (`rchar` of `/proc/PID/io`), summed.
pub fn bytes_read(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/io")).ok())
        .filter_map(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("rchar: "))
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
        .sum()
}

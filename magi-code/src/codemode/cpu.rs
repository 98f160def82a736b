//! The engine's CPU clock: the helper thread's own CPU time (`/proc/thread-self/schedstat`,
//! nanoseconds), so a cell blocked on a tool result spends none of its budget. Read only when
//! the wall clock says the budget could be spent, which keeps the interrupt handler cheap.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::time::{Duration, Instant};

/// A CPU budget for the thread that created it.
#[derive(Debug)]
pub struct CpuBudget {
    file: Option<File>,
    budget: Duration,
    start: Duration,
    /// CPU spent at the last read, and when that read was.
    spent: Duration,
    read_at: Instant,
}

impl CpuBudget {
    /// A budget of `budget` counted from now, for the calling thread.
    #[must_use]
    pub fn new(budget: Duration) -> Self {
        let mut file = File::open("/proc/thread-self/schedstat").ok();
        let start = file.as_mut().and_then(read_ns).unwrap_or_default();
        Self {
            file,
            budget,
            start,
            spent: Duration::ZERO,
            read_at: Instant::now(),
        }
    }

    /// Whether the budget is spent. CPU time never runs faster than the wall clock (one
    /// thread), so while less wall time than the budget left has passed, nothing is read.
    pub fn spent(&mut self) -> bool {
        let left = self.budget.saturating_sub(self.spent);
        let now = Instant::now();
        if now.duration_since(self.read_at) < left {
            return false;
        }
        self.spent = match self.file.as_mut().and_then(read_ns) {
            Some(ns) => ns.saturating_sub(self.start),
            // No schedstat: the wall clock since the last read stands in for CPU time.
            None => self.spent + now.duration_since(self.read_at),
        };
        self.read_at = now;
        self.spent >= self.budget
    }
}

/// The first field of schedstat: nanoseconds run on a CPU.
fn read_ns(f: &mut File) -> Option<Duration> {
    let mut s = String::new();
    f.seek(SeekFrom::Start(0)).ok()?;
    f.read_to_string(&mut s).ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_thread_spends_no_budget_and_a_busy_one_does() {
        let mut b = CpuBudget::new(Duration::from_millis(30));
        assert!(b.file.is_some(), "schedstat is readable");
        // Blocking (not running) for longer than the budget leaves it unspent.
        std::thread::sleep(Duration::from_millis(60));
        assert!(!b.spent());
        let t = Instant::now();
        while !b.spent() {
            assert!(t.elapsed() < Duration::from_secs(10), "budget never spent");
        }
    }
}

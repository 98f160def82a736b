use super::*;
use crate::util::clock::{FakeClock, RealClock};
use std::process::Command;

fn go(cmd: &str) -> HookEnd {
    let d = tempfile::tempdir().unwrap();
    run(
        cmd,
        d.path(),
        b"{}".to_vec(),
        HOOK_RUN,
        &Cancel::default(),
        &RealClock,
    )
}

/// The process group whose ID the hook wrote to `dir/pgid`, once it has.
fn pgid(dir: &Path) -> Option<i64> {
    std::fs::read_to_string(dir.join("pgid"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// Polls (real pipes, bounded) until `dir/pgid` is written.
fn wait_pgid(dir: &Path) -> i64 {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(g) = pgid(dir) {
            return g;
        }
        assert!(Instant::now() < end, "the hook never started");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits (bounded) until the process group the hook wrote to `dir/pgid` is gone.
fn group_gone(dir: &Path) {
    let pgid = pgid(dir).expect("pgid written");
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let alive = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("kill -0 -- -{pgid} 2>/dev/null"))
            .status()
            .unwrap()
            .success();
        if !alive {
            return;
        }
        assert!(Instant::now() < end, "process group {pgid} still alive");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A virtual clock that lets no time pass until the hook has written its `pgid`, so the
/// bound is measured from a hook that really runs, however loaded the machine.
struct Started<'a> {
    fake: FakeClock,
    dir: &'a Path,
}

impl Clock for Started<'_> {
    fn now(&self) -> Instant {
        self.fake.now()
    }

    fn sleep(&self, d: Duration, cancel: &Cancel) -> bool {
        wait_pgid(self.dir);
        self.fake.sleep(d, cancel)
    }

    fn recv(&self, rx: &mpsc::Receiver<()>, d: Duration) -> Result<(), RecvTimeoutError> {
        wait_pgid(self.dir);
        self.fake.recv(rx, d)
    }
}

/// Runs `cmd` against the [`Started`] virtual clock; returns how it ended and the virtual
/// milliseconds it took.
fn on_virtual_clock(cmd: &str, dir: &Path) -> (HookEnd, u64) {
    let clock = Started {
        fake: FakeClock::default(),
        dir,
    };
    let end = run(cmd, dir, Vec::new(), HOOK_RUN, &Cancel::default(), &clock);
    (end, clock.fake.elapsed_ms())
}

#[test]
fn the_bound_is_ten_seconds_at_its_edge() {
    assert_eq!(HOOK_RUN, Duration::from_secs(10));
    assert_eq!(phrase_of(HOOK_RUN), "timed out after 10 s");
    assert_eq!(
        phrase_of(Duration::from_millis(300)),
        "timed out after 300 ms"
    );
    let t0 = Instant::now();
    let end = Deadline::after(t0, HOOK_RUN);
    let at = |ms| t0 + Duration::from_millis(ms);
    let c = Cancel::default();
    assert_eq!(past(&c, end, HOOK_RUN, at(9_999)), None, "last ms inside");
    assert_eq!(
        past(&c, end, HOOK_RUN, at(10_000)),
        Some(HookEnd::Failed("timed out after 10 s".into())),
        "first ms past"
    );
    c.cancel();
    assert_eq!(past(&c, end, HOOK_RUN, at(1)), Some(HookEnd::Cancelled));
}

#[test]
fn exit_statuses_and_stdin() {
    assert_eq!(go("exit 0"), HookEnd::Exit(0));
    assert_eq!(go("exit 2"), HookEnd::Exit(2));
    assert_eq!(go("exit 7"), HookEnd::Exit(7));
    assert_eq!(
        go("kill -9 $$"),
        HookEnd::Failed("killed by signal 9".into())
    );
    assert_eq!(go(r#"[ "$(cat)" = "{}" ]"#), HookEnd::Exit(0));
}

#[test]
fn a_loud_hook_within_its_bound_passes() {
    // Loud on both pipes: output is drained, never blocking it.
    assert_eq!(
        go("head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2"),
        HookEnd::Exit(0)
    );
}

#[test]
fn a_hook_past_its_bound_is_killed_with_its_group_on_the_virtual_clock() {
    let d = tempfile::tempdir().unwrap();
    let (end, ms) = on_virtual_clock("echo $$ > pgid; sleep 30 & sleep 30", d.path());
    assert_eq!(end, HookEnd::Failed("timed out after 10 s".into()));
    assert_eq!(ms, 10_000, "killed when the bound is reached, not later");
    group_gone(d.path());
}

#[test]
fn a_background_process_holding_the_pipes_runs_into_the_bound() {
    let d = tempfile::tempdir().unwrap();
    let (end, ms) = on_virtual_clock("echo $$ > pgid; sleep 30 & exit 0", d.path());
    assert_eq!(end, HookEnd::Failed("timed out after 10 s".into()));
    assert_eq!(ms, 10_000);
    group_gone(d.path());
}

#[test]
fn cancellation_stops_a_running_hook() {
    let d = tempfile::tempdir().unwrap();
    let cancel = std::sync::Arc::new(Cancel::default());
    let (c, dir) = (std::sync::Arc::clone(&cancel), d.path().to_owned());
    // Cancelled once the hook runs, whenever that is.
    let t = std::thread::spawn(move || {
        wait_pgid(&dir);
        c.cancel();
    });
    let end = run(
        "echo $$ > pgid; sleep 30",
        d.path(),
        Vec::new(),
        HOOK_RUN,
        &cancel,
        &RealClock,
    );
    t.join().unwrap();
    assert_eq!(end, HookEnd::Cancelled);
    group_gone(d.path());
}

#[test]
fn a_missing_cwd_fails_to_start() {
    let end = run(
        "true",
        Path::new("/nonexistent/hook/cwd"),
        Vec::new(),
        HOOK_RUN,
        &Cancel::default(),
        &RealClock,
    );
    assert_eq!(end, HookEnd::Failed("failed to start".into()));
}

#[test]
fn a_hook_that_never_reads_a_large_stdin_still_ends() {
    let d = tempfile::tempdir().unwrap();
    let end = run(
        "exit 0",
        d.path(),
        vec![b'x'; 1 << 20],
        HOOK_RUN,
        &Cancel::default(),
        &RealClock,
    );
    assert_eq!(end, HookEnd::Exit(0));
}

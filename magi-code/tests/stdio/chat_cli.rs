//! `magi-code chat`: a person's terminal client over a real `serve --stdio` child.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn command(home: &Path, cwd: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_magi-code"));
    c.arg("chat")
        .args(args)
        .env("MC_HOME", home)
        // Colour must stay off for pipes even when NO_COLOR does not ask for it.
        .env_remove("NO_COLOR")
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Settings that play `script` with the scripted provider (the terminal chat's tests too).
pub(crate) fn use_script(home: &Path, script: &str) {
    let path = home.join("script.json");
    std::fs::write(&path, script).unwrap();
    let settings =
        serde_json::json!({"model": "script", "providers": {"scripted": {"script": path}}});
    std::fs::write(home.join("settings.json"), settings.to_string()).unwrap();
}

fn chat(home: &Path, cwd: &Path, args: &[&str], input: &str) -> (i32, String) {
    let mut c = command(home, cwd, args).spawn().unwrap();
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_piped_chat_on_the_embedded_default_leaves_a_titled_session() {
    // The offline title starts before `run.finished` and cleanup gives running titles a grace,
    // so even a chat whose stdin ends right after one turn stores its title.
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let (code, out) = chat(home.path(), cwd.path(), &[], "Fix the login bug\n");
    assert_eq!(code, 0, "{out}");
    let sid = out.split_whitespace().nth(1).unwrap().to_owned();
    let history =
        std::fs::read_to_string(home.path().join("sessions").join(format!("{sid}.jsonl"))).unwrap();
    let titles: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["type"] == "title")
        .collect();
    assert_eq!(titles.len(), 1, "{history}");
    assert_eq!(titles[0]["title"], "Fix the login bug");
    let (_, listed) = chat(home.path(), cwd.path(), &[], "/sessions\n");
    assert!(
        listed.contains(&format!("{sid}  Fix the login bug  ")),
        "{listed}"
    );
}

#[test]
fn chat_streams_replies_and_reopens_the_session() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let (code, out) = chat(home.path(), cwd.path(), &[], "Hello there\n/quit\n");
    assert_eq!(code, 0);
    assert!(out.contains("magi> Hello there"), "{out}");
    let sid = out.split_whitespace().nth(1).unwrap().to_owned();
    let history =
        std::fs::read_to_string(home.path().join("sessions").join(format!("{sid}.jsonl"))).unwrap();
    assert!(history.contains("\"type\":\"user_input\""));
    let (code, out) = chat(home.path(), cwd.path(), &["--session", &sid], "again\n");
    assert_eq!(code, 0);
    assert!(out.contains("magi> again"), "{out}");
    let (code, _) = chat(home.path(), cwd.path(), &["--session", "missing"], "");
    assert_eq!(code, 1);
}

#[test]
fn chat_asks_before_a_tool_runs() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let script = home.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"steps":[{"tool":{"name":"write_file","input":{"path":"a.txt","content":"x"}}},{"text":"done"}]}]}"#,
    )
    .unwrap();
    let settings =
        serde_json::json!({"model": "script", "providers": {"scripted": {"script": script}}});
    std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
    let (code, out) = chat(home.path(), cwd.path(), &[], "write it\nn\n");
    assert_eq!(code, 0);
    assert!(out.contains("allow write_file a.txt"), "{out}");
    assert!(out.contains("failed"), "{out}");
    assert!(
        !cwd.path().join("a.txt").exists(),
        "denied by default answer"
    );
    // Anything but y/yes/n/no (any case) or an empty line asks again.
    let (_, out) = chat(home.path(), cwd.path(), &[], "write it\nmaybe\nYes\n");
    assert!(out.contains("please answer y or n [y/N]"), "{out}");
    assert!(out.contains("completed"), "{out}");
    assert!(cwd.path().join("a.txt").exists());
    std::fs::remove_file(cwd.path().join("a.txt")).unwrap();
    let (_, out) = chat(home.path(), cwd.path(), &[], "write it\nNO\n");
    assert!(out.contains("failed"), "{out}");
    assert!(!cwd.path().join("a.txt").exists(), "no denies");
}

/// The chat negotiates `tool.cards` and shows each finished card: a command with its exit
/// code, an edited file with its line counts, a read with its lines.
#[test]
fn chat_shows_tool_cards() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("f.txt"), "a\nb\n").unwrap();
    let script = home.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"steps":[
            {"tool":{"name":"edit_file","input":{"path":"f.txt","old":"b\n","new":"c\nd\n"}}},
            {"tool":{"name":"read_file","input":{"path":"f.txt"}}},
            {"tool":{"name":"shell","input":{"command":"exit 4"}}},
            {"text":"done"}]}]}"#,
    )
    .unwrap();
    let settings = serde_json::json!({"model": "script", "providers": {"scripted": {"script": script}},
        "tools": {"read": "allow", "write": "allow", "shell": "allow"}});
    std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
    let (code, out) = chat(home.path(), cwd.path(), &[], "go\n/quit\n");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("  f.txt +2 -1\n"), "{out}");
    assert!(out.contains("  f.txt: 3 lines\n"), "{out}");
    assert!(out.contains("  $ exit 4 → exit 4, "), "{out}");
    assert_eq!(
        out.matches("\n  ").count(),
        3,
        "one line per finished card: {out}"
    );
}

fn session_id(out: &str) -> String {
    out.split_whitespace().nth(1).unwrap().to_owned()
}

#[test]
fn piped_chat_exits_1_when_a_turn_failed_or_was_refused() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    // The echo model: the README's first command.
    let (code, out) = chat(home.path(), cwd.path(), &[], "Hello, magi-code\n");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("magi> Hello, magi-code"), "{out}");
    // A prompt over 16,384 bytes is refused, the next turn still runs.
    let long = "a".repeat(16_385);
    let (code, out) = chat(home.path(), cwd.path(), &[], &format!("{long}\nok\n"));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("[turn refused: the server did not accept the request (invalid_params)]"),
        "{out}"
    );
    assert!(out.contains("magi> ok"), "{out}");
    let (code, _) = chat(home.path(), cwd.path(), &[], &format!("{}\n", &long[1..]));
    assert_eq!(code, 0, "16,384 bytes is a prompt");
    // A failing scripted turn, with a tool activity before it: exit 1, no escapes.
    use_script(
        home.path(),
        r#"{"turns":[{"steps":[{"tool":{"name":"read_file","input":{"path":"missing"}}},{"fail":"boom"}]}]}"#,
    );
    let (code, out) = chat(home.path(), cwd.path(), &[], "go\n");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("[read_file failed: read_file missing: not found]"),
        "{out}"
    );
    assert!(out.contains("[failed: execution_failed]"), "{out}");
    assert!(!out.contains('\x1b') && !out.contains('\x08'), "{out:?}");
}

#[test]
fn chat_lists_and_opens_sessions() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let (_, first) = chat(home.path(), cwd.path(), &[], "one\n");
    let (_, second) = chat(home.path(), cwd.path(), &[], "two\n");
    let (a, b) = (session_id(&first), session_id(&second));
    // The title each history stores now (an echo session may have been titled with its
    // first input before its chat shut down): the listing shows exactly that.
    let stored_title = |sid: &str| {
        let text =
            std::fs::read_to_string(home.path().join("sessions").join(format!("{sid}.jsonl")))
                .unwrap();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|r| r["type"] == "title")
            .filter_map(|r| r["title"].as_str().map(str::to_owned))
            .next_back()
            .unwrap_or_else(|| "(untitled)".to_owned())
    };
    let titles = [(a.clone(), stored_title(&a)), (b.clone(), stored_title(&b))];
    let (code, out) = chat(
        home.path(),
        cwd.path(),
        &["--session", &a],
        &format!("/help\n/sessions\n/open {b}\nthree\n"),
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("/open ID"), "{out}");
    let listed: Vec<&str> = out
        .lines()
        .map(|l| l.trim_start_matches("you> "))
        .filter(|l| l.starts_with(&a) || l.starts_with(&b))
        .collect();
    assert_eq!(listed.len(), 2, "{out}");
    for line in &listed {
        let f: Vec<&str> = line.split("  ").collect();
        // id, title (the stored one), updated_at (RFC 3339 UTC), eligibility.
        let stored = &titles.iter().find(|(id, _)| id == f[0]).unwrap().1;
        assert_eq!(f[1], stored, "{line}");
        assert!(f[2].ends_with('Z') && f[2].contains('T'), "{line}");
        assert_eq!(f[3], "available", "{line}");
    }
    let this = listed.iter().find(|l| l.starts_with(&a)).unwrap();
    assert!(this.ends_with("(this chat)"), "{this}");
    assert!(out.contains(&format!("session {b} opened")), "{out}");
    assert!(out.contains("magi> three"), "{out}");
    let history = |sid: &str| {
        std::fs::read_to_string(home.path().join("sessions").join(format!("{sid}.jsonl"))).unwrap()
    };
    assert!(history(&b).contains("three") && !history(&a).contains("three"));
    // A refused open keeps the chat on its session and fails a piped run.
    let (code, out) = chat(
        home.path(),
        cwd.path(),
        &["--session", &a],
        "/open missing\n/bogus\nfour\n",
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "[open refused: there is no saved session with that ID here (session_missing)]"
        ),
        "{out}"
    );
    assert!(out.contains("unknown command /bogus"), "{out}");
    assert!(history(&a).contains("four"));
    assert!(!out.contains('\x1b'), "{out:?}");
}

/// Reads the child's stdout on a thread, so a test can wait for text while it runs.
struct Live {
    child: Child,
    text: mpsc::Receiver<String>,
    seen: String,
}

impl Live {
    fn spawn(home: &Path, cwd: &Path) -> Self {
        let mut child = command(home, cwd, &[]).spawn().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (tx, text) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0
                    || tx
                        .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                        .is_err()
                {
                    break;
                }
            }
        });
        Self {
            child,
            text,
            seen: String::new(),
        }
    }

    /// Waits until the output so far holds `want` `times` times.
    fn wait_for(&mut self, want: &str, times: usize) {
        let end = Instant::now() + Duration::from_secs(10);
        while self.seen.matches(want).count() < times {
            let left = end.saturating_duration_since(Instant::now());
            match self.text.recv_timeout(left) {
                Ok(t) => self.seen.push_str(&t),
                Err(_) => panic!("no {want:?} in {:?}", self.seen),
            }
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    // Ctrl-C without a terminal: std cannot send a signal but SIGKILL.
    #[allow(unsafe_code)]
    fn interrupt(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) with the pid of our own live child touches no memory of ours.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    }

    /// Waits for the exit (at most 10 s) without closing stdin.
    fn exit_code(&mut self) -> i32 {
        let child = &mut self.child;
        let st = crate::common::poll::within(Duration::from_secs(10), || child.try_wait().unwrap());
        let st = st.unwrap_or_else(|| panic!("still running: {:?}", self.seen));
        while let Ok(t) = self.text.recv_timeout(Duration::from_millis(200)) {
            self.seen.push_str(&t);
        }
        st.code().unwrap_or(-1)
    }
}

#[test]
fn ctrl_c_cancels_the_turn_then_quits_at_the_prompt() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    use_script(
        home.path(),
        r#"{"turns":[{"steps":[{"text":"start"},{"sleep_ms":30000},{"text":"never"}]},{"steps":[{"sleep_ms":30000}]}]}"#,
    );
    let mut live = Live::spawn(home.path(), cwd.path());
    live.wait_for("you> ", 1);
    live.send("go\n");
    live.wait_for("magi> start", 1);
    let began = Instant::now();
    live.interrupt();
    live.wait_for("[cancelled]", 1);
    assert!(began.elapsed() < Duration::from_secs(5));
    live.wait_for("you> ", 2);
    // At the prompt Ctrl-C leaves, after a clean shutdown, with stdin still open.
    live.interrupt();
    assert_eq!(live.exit_code(), 0, "{}", live.seen);
    assert!(!live.seen.contains("never"), "{}", live.seen);
    // Piped output shows no waiting indicator.
    assert!(!live.seen.contains('\x08') && !live.seen.contains('\x1b'));
}

#[test]
fn ctrl_c_twice_leaves_a_running_turn() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    // The first Ctrl-C asks for the cancellation; the second leaves, whether the turn is
    // still stopping or already back at the prompt.
    use_script(home.path(), r#"{"turns":[{"steps":[{"sleep_ms":30000}]}]}"#);
    let mut live = Live::spawn(home.path(), cwd.path());
    live.wait_for("you> ", 1);
    live.send("go\n");
    live.wait_for("magi> ", 1);
    let began = Instant::now();
    live.interrupt();
    live.wait_for("[stopping; Ctrl-C again leaves]", 1);
    live.interrupt();
    let code = live.exit_code();
    assert!(began.elapsed() < Duration::from_secs(8));
    assert_eq!(code, 0, "{}", live.seen);
}

/// Settings with Code Mode on that play a turn calling `exec` with `code`, then `after`.
fn use_cell(home: &Path, code: &str, after: &[serde_json::Value]) {
    let path = home.join("script.json");
    let mut steps = vec![serde_json::json!({"tool": {"name": "exec", "input": {"code": code}}})];
    steps.extend_from_slice(after);
    steps.push(serde_json::json!({"text": "done"}));
    let script = serde_json::json!({"turns": [{"steps": steps}]});
    std::fs::write(&path, script.to_string()).unwrap();
    let settings = serde_json::json!({"model": "script", "providers": {"scripted": {"script": path}},
        "code_mode": {"enabled": true}});
    std::fs::write(home.join("settings.json"), settings.to_string()).unwrap();
}

/// A Code Mode cell is one block (`code-mode.md` 6): the `exec` header, each nested call
/// beneath it in order with its final state and card, the `exec`'s final state, then the reply.
#[test]
fn chat_shows_a_code_mode_cell_as_one_block() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(cwd.path().join("b.txt"), "beta\ngamma\n").unwrap();
    let code = "const a = await tools.read_file({path:\"a.txt\"});\n\
                const b = await tools.read_file({path:\"b.txt\"});\nreturn a.length + b.length";
    use_cell(home.path(), code, &[]);
    let (code, out) = chat(home.path(), cwd.path(), &[], "go\n");
    assert_eq!(code, 0, "{out}");
    let block = "magi> \n[exec: 3 lines]\n\
                 \x20 [read_file completed: read_file a.txt: read 1 lines]\n\
                 \x20   a.txt: 1 lines\n\
                 \x20 [read_file completed: read_file b.txt: read 2 lines]\n\
                 \x20   b.txt: 2 lines\n\
                 [exec completed: exec: 3 lines]\ndone\n";
    assert!(out.contains(block), "{out}");
    assert!(
        !out.contains("started"),
        "nested calls show once, when they end: {out}"
    );
}

/// A nested call that fails shows `failed` in the block, caught or not; an approval for a
/// nested call is asked inside it; a direct call after the cell shows as before.
#[test]
fn chat_shows_failed_nested_calls_and_their_approvals_inside_the_cell() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let code = "try { await tools.read_file({path:\"missing.txt\"}); } catch (e) {}\n\
                await tools.write_file({path:\"w.txt\", content:\"x\"});\n\
                await tools.read_file({path:\"gone.txt\"});";
    let direct = serde_json::json!({"tool": {"name": "read_file", "input": {"path": "w.txt"}}});
    use_cell(home.path(), code, &[direct]);
    let (code, out) = chat(home.path(), cwd.path(), &[], "go\ny\n");
    assert_eq!(code, 0, "{out}");
    let block = "[exec: 3 lines]\n\
                 \x20 [read_file failed: read_file missing.txt: not found]\n\
                 \x20   missing.txt: failed\n\
                 \x20 allow code: write_file w.txt (1 bytes)? [y/N] \n\
                 \x20 [write_file completed: write_file w.txt (1 bytes): wrote 1 bytes]\n\
                 \x20   w.txt +1 -0\n\
                 \x20 [read_file failed: read_file gone.txt: not found]\n\
                 \x20   gone.txt: failed\n\
                 [exec failed: exec: 3 lines]\n\
                 [read_file started: read_file w.txt]\n\
                 [read_file completed: read_file w.txt: read 1 lines]\n\
                 \x20 w.txt: 1 lines\n\
                 done\n";
    assert!(out.contains(block), "{out}");
    assert_eq!(
        std::fs::read_to_string(cwd.path().join("w.txt")).unwrap(),
        "x"
    );
}

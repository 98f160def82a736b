//! `magi-code chat` on a pseudo-terminal: the real binary in raw mode with its inline
//! viewport, driven by typed keys, its output parsed by a terminal emulator (vt100) and
//! checked on the screen a person would see.

use crate::chat_cli::use_script;
use crate::common::poll::within;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ROWS: u16 = 30;
const COLS: u16 = 100;
/// How long a screen condition may take: generous, the machine is shared.
const DEADLINE: Duration = Duration::from_secs(60);

/// A chat on a pty: the child, the master side and the emulated screen.
struct Tty {
    child: Child,
    master: File,
    screen: Arc<Mutex<vt100::Parser>>,
}

/// The queries a terminal answers that the chat asks: the cursor position (the inline
/// viewport asks where it starts) and the primary device attributes (asked with the keyboard
/// protocol query, which this terminal, like many, does not answer).
const ASKS: [&[u8]; 2] = [b"\x1b[6n", b"\x1b[c"];

/// Feeds the child's output to the emulator, answering its queries as a terminal does.
fn pump(mut from: File, mut to: File, screen: Arc<Mutex<vt100::Parser>>) {
    let mut buf = [0u8; 8192];
    let mut pending = Vec::new();
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        pending.extend_from_slice(&buf[..n]);
        let mut p = screen.lock().unwrap();
        loop {
            let found = ASKS
                .iter()
                .filter_map(|q| Some((pending.windows(q.len()).position(|w| w == *q)?, *q)))
                .min();
            let Some((at, ask)) = found else { break };
            p.process(&pending[..at]);
            if ask == ASKS[0] {
                let (row, col) = p.screen().cursor_position();
                let _ = write!(to, "\x1b[{};{}R", row + 1, col + 1);
            } else {
                let _ = write!(to, "\x1b[?62;22c");
            }
            pending.drain(..at + ask.len());
        }
        // Keep a possibly split query (from its ESC on) for the next read.
        let tail = pending.len().saturating_sub(3);
        let upto = pending[tail..]
            .iter()
            .position(|b| *b == 0x1b)
            .map_or(pending.len(), |i| tail + i);
        p.process(&pending[..upto]);
        pending.drain(..upto);
    }
}

impl Tty {
    fn spawn(home: &Path, cwd: &Path, args: &[&str]) -> Self {
        Self::spawn_with(home, cwd, args, "")
    }

    /// A chat with `NO_COLOR` set to `no_color`.
    fn spawn_with(home: &Path, cwd: &Path, args: &[&str], no_color: &str) -> Self {
        let (master, slave) = crate::common::pty::openpty(Some((ROWS, COLS)));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_magi-code"));
        cmd.arg("chat")
            .args(args)
            .env("MC_HOME", home)
            .env("TERM", "xterm-256color")
            .env("NO_COLOR", no_color)
            .current_dir(cwd)
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: between fork and exec only async-signal-safe calls: a new session whose
        // controlling terminal is the pty (as a terminal emulator starts a shell).
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        let master = File::from(master);
        let screen = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 0)));
        let (from, to) = (master.try_clone().unwrap(), master.try_clone().unwrap());
        let s = screen.clone();
        std::thread::spawn(move || pump(from, to, s));
        Self {
            child,
            master,
            screen,
        }
    }

    fn contents(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    /// Waits until the screen satisfies `cond`; panics with the screen past the deadline.
    fn wait(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        self.wait_within(DEADLINE, what, cond)
    }

    /// [`Tty::wait`] with its own deadline.
    fn wait_within(&self, deadline: Duration, what: &str, cond: impl Fn(&str) -> bool) -> String {
        within(deadline, || Some(self.contents()).filter(|s| cond(s)))
            .unwrap_or_else(|| panic!("waited for {what}; the screen:\n{}", self.contents()))
    }

    fn wait_for(&self, text: &str) -> String {
        self.wait(text, |s| s.contains(text))
    }

    /// `look` at the cell of the first character of `text` on the screen, if shown.
    fn cell<T>(&self, text: &str, look: impl Fn(&vt100::Cell) -> T) -> Option<T> {
        let p = self.screen.lock().unwrap();
        let screen = p.screen();
        let rows: Vec<String> = screen.rows(0, COLS).collect();
        let (row, line) = rows.iter().enumerate().find(|(_, l)| l.contains(text))?;
        let col = line[..line.find(text)?].chars().count();
        screen.cell(row as u16, col as u16).map(look)
    }

    /// Whether the first character of `text` on the screen is dimmed.
    fn dimmed(&self, text: &str) -> bool {
        self.cell(text, vt100::Cell::dim).unwrap_or(false)
    }

    fn keys(&mut self, bytes: &str) {
        self.master.write_all(bytes.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    /// Resizes the terminal (the kernel sends SIGWINCH to the chat).
    fn resize(&mut self, rows: u16, cols: u16) {
        self.screen
            .lock()
            .unwrap()
            .screen_mut()
            .set_size(rows, cols);
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize from a live local.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(rc, 0, "TIOCSWINSZ");
    }

    /// Waits for the child's exit; its code.
    fn exit(mut self) -> i32 {
        let status = within(DEADLINE, || self.child.try_wait().unwrap());
        let status =
            status.unwrap_or_else(|| panic!("the chat did not exit:\n{}", self.contents()));
        status.code().unwrap_or(-1)
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The session ID the chat's first line names.
fn session_of(screen: &str) -> String {
    screen
        .split_whitespace()
        .skip_while(|w| *w != "session")
        .nth(1)
        .unwrap()
        .to_owned()
}

/// The screen without trailing blanks on its lines.
fn trimmed(s: &str) -> String {
    s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

/// Screens captured for people to look at: written into the folder `MC_TUI_SCREENS` names,
/// if set.
fn capture(screens: &mut Vec<(String, String)>, title: &str, screen: &str) {
    screens.push((title.to_owned(), screen.to_owned()));
}

fn save(name: &str, screens: &[(String, String)]) {
    let Some(dir) = std::env::var_os("MC_TUI_SCREENS") else {
        return;
    };
    let path = Path::new(&dir).join(format!("{name}.txt"));
    let mut text = String::new();
    for (title, s) in screens {
        text.push_str(&format!("=== {title} ({COLS}x{ROWS}) ===\n{s}\n\n"));
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_terminal_chat_answers_an_approval_stops_a_reply_and_resumes_a_session() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    use_script(
        home.path(),
        r#"{"turns":[
            {"steps":[{"reasoning_summary":"Checking where to write."},
                      {"text":"I will **write** the file:\n"},{"sleep_ms":1500},
                      {"tool":{"name":"write_file","input":{"path":"a.txt","content":"x"}}},
                      {"text":"Done:\n- wrote `a.txt`\n"}]},
            {"steps":[{"text":"Thinking about it slowly"},{"sleep_ms":30000},{"text":" never"}]}]}"#,
    );
    let mut screens = Vec::new();
    let mut tty = Tty::spawn(home.path(), cwd.path(), &[]);
    let sid = session_of(&tty.wait_for("/help for commands"));

    // Typed before the dialog shows: it stays in the editor, never answers.
    tty.keys("write it\r");
    tty.wait_for("I will write the file:");
    tty.keys("y");
    let s = tty.wait_for("expires in");
    assert!(s.contains("Allow write_file a.txt"), "{s}");
    let lines: Vec<&str> = s.lines().map(|l| l.trim_end_matches([' ', '│'])).collect();
    assert!(
        lines.contains(&"│answer›"),
        "the early key is not the answer: {s}"
    );
    assert!(lines.contains(&"› y"), "it stays in the editor: {s}");
    capture(&mut screens, "an approval dialog", &s);
    tty.keys("maybe\r");
    tty.wait_for("please answer y or n");
    tty.keys("yes\r");
    let s = tty.wait("the turn's end", |s| {
        s.contains("done in") && s.contains("› y") && s.contains("/help for commands")
    });
    assert!(s.contains("✓ write_file"), "{s}");
    assert!(s.contains("• wrote a.txt"), "{s}");
    assert!(s.contains("a.txt +1 -0"), "{s}");
    assert!(cwd.path().join("a.txt").exists(), "the tool ran");
    capture(
        &mut screens,
        "after the approval, the tool and the reply",
        &s,
    );

    // Ctrl-C at a prompt with text clears it.
    tty.keys("\x03");
    tty.wait("an empty editor", |s| {
        s.lines().any(|l| l.trim_end() == "›")
    });
    tty.keys("go slowly\r");
    let s = tty.wait("the reply streaming a while", |s| {
        s.contains("Thinking about it slowly") && !s.contains(" 0.0s ")
    });
    capture(&mut screens, "a reply streaming", &s);
    let status = s.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(status.starts_with(" script · effort default · "), "{s}");
    assert!(status.trim_end().ends_with("s · Ctrl-C to stop"), "{s}");
    tty.keys("\x03");
    let s = tty.wait("the prompt", |s| {
        s.contains("the turn was cancelled") && s.contains("/help for commands")
    });
    assert!(!s.contains("never"), "{s}");
    capture(&mut screens, "Ctrl-C stopped the reply", &s);
    tty.keys("/quit\r");
    // The session was saved by its first prompt: leaving tells the way back.
    tty.wait_for(&format!("reopen with `magi-code chat --session {sid}`"));
    assert_eq!(tty.exit(), 0);

    let mut tty = Tty::spawn(home.path(), cwd.path(), &["--session", &sid]);
    let s = tty.wait(&sid, |s| {
        s.contains("/help for commands") && s.contains("go slowly")
    });
    assert!(s.contains("› write it"), "{s}");
    assert!(
        s.contains("✓ write_file a.txt (1 bytes): wrote 1 bytes"),
        "{s}"
    );
    assert!(s.contains("• wrote a.txt"), "{s}");
    assert!(s.contains("Thinking about it slowly"), "{s}");
    capture(&mut screens, "a resumed session shows its transcript", &s);
    assert!(
        tty.dimmed("Checking where to write."),
        "a reasoning summary is dimmed: {s}"
    );
    // Up brings back the session's last prompt.
    tty.keys("\x1b[A");
    tty.wait("the last prompt in the editor", |s| {
        s.lines().any(|l| l.trim_end() == "› go slowly") && s.matches("› go slowly").count() == 2
    });
    save("turns", &screens);
}

#[test]
fn the_editor_takes_cursor_keys_a_paste_as_one_prompt_and_switches_models() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let script = home.path().join("script.json");
    std::fs::write(&script, r#"{"turns":[{"steps":[{"text":"scripted"}]}]}"#).unwrap();
    let settings = serde_json::json!({"providers": {
        "catalog": {"enabled": ["scripted/echo", "scripted/script"]},
        "scripted": {"script": script}}});
    std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
    let mut screens = Vec::new();
    let mut tty = Tty::spawn(home.path(), cwd.path(), &[]);
    let s = tty.wait_for("/help for commands");
    assert!(s.contains(" echo · effort default"), "{s}");
    let first = s.split_whitespace().nth(1).unwrap().to_owned();

    // Left arrow, then a character inserted before the cursor (the echo model replies with
    // the prompt).
    tty.keys("helo\x1b[Dl\r");
    let s = tty.wait_for("done in");
    assert!(s.lines().any(|l| l.trim_end() == "hello"), "{s}");

    // A bracketed paste of two lines and a third after Alt-Enter: one prompt, one turn.
    tty.keys("\x1b[200~first line\nsecond line\x1b[201~\x1b\rthird\r");
    let s = tty.wait("a second turn", |s| s.matches("done in").count() == 2);
    let s = trimmed(&s);
    assert!(s.contains("› first line\n  second line\n  third"), "{s}");
    assert!(
        s.contains("first line\nsecond line\nthird\n─ done in"),
        "{s}"
    );
    capture(&mut screens, "a pasted multi-line prompt", &s);

    // The echo model replies with the prompt: a Markdown prompt shows the rendering.
    tty.keys("\x1b[200~## Plan\n1. run **all** tests\n- fix `a.rs`\n```sh\ncargo test -q\n```\x1b[201~\r");
    let s = tty.wait("a third turn", |s| {
        trimmed(s).contains("cargo test -q\n```\n─ done in") && s.contains("/help for commands")
    });
    assert!(trimmed(&s).contains("\nPlan\n"), "{s}");
    assert!(s.contains("1. run all tests"), "{s}");
    assert!(s.contains("• fix a.rs"), "{s}");
    assert!(s.contains("```sh"), "a code block is kept verbatim: {s}");
    capture(&mut screens, "a Markdown reply", &s);

    tty.keys("/model\r");
    let s = tty.wait_for("scripted/script");
    assert!(s.contains("scripted/echo"), "{s}");
    tty.keys("/model script\r");
    let s = tty.wait("the switch", |s| {
        s.contains("now script") && s.contains(" script · effort")
    });
    capture(&mut screens, "/model lists the catalog and switches", &s);
    tty.keys("/effort\r");
    tty.wait_for("efforts of script: default");
    tty.keys("/effort high\r");
    tty.wait_for(
        "[selection refused: the model does not take that effort level (effort_unsupported)]",
    );

    tty.keys("/new\r");
    let s = tty.wait("a new session", |s| {
        let other = s
            .split("session ")
            .skip(1)
            .filter_map(|w| w.split_once(" (new: saved with its first prompt"))
            .any(|(id, _)| id != first);
        // A selection belongs to its session: the new one has the default model.
        other && s.contains(" echo · effort default · untitled · /help for commands")
    });
    capture(&mut screens, "/new", &s);
    // Ctrl-C at an empty prompt leaves.
    tty.keys("\x03");
    assert_eq!(tty.exit(), 0);
    save("editor", &screens);
}

#[test]
fn a_failed_startup_on_a_terminal_names_the_cause_and_exits_1() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("settings.json"), r#"{"tols": {}}"#).unwrap();
    let tty = Tty::spawn(home.path(), cwd.path(), &[]);
    let s = tty.wait_for("unknown key \"tols\"");
    assert!(
        s.contains("initialization failed: configuration_invalid"),
        "{s}"
    );
    assert_eq!(tty.exit(), 1);
}

#[test]
fn no_color_keeps_the_styles_but_not_the_colours() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    for (no_color, coloured) in [("", true), ("1", false)] {
        let mut tty = Tty::spawn_with(home.path(), cwd.path(), &[], no_color);
        tty.wait_for("/help for commands");
        tty.keys("say it\r");
        tty.wait_for("done in");
        let fg = tty.cell("› say it", vt100::Cell::fgcolor).unwrap();
        assert_eq!(
            fg != vt100::Color::Default,
            coloured,
            "NO_COLOR={no_color:?}"
        );
        // The first "say it" is the prompt's: bold, either way; the turn's end stays dim.
        assert_eq!(tty.cell("say it", vt100::Cell::bold), Some(true));
        assert!(tty.dimmed("─ done in"));
        tty.keys("\x04");
        assert_eq!(tty.exit(), 0);
    }
}

#[test]
fn a_resized_terminal_keeps_the_chat_going() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let mut tty = Tty::spawn(home.path(), cwd.path(), &[]);
    tty.wait_for("/help for commands");
    tty.resize(20, 60);
    tty.keys("still here\r");
    let s = tty.wait("a reply after the resize", |s| {
        s.contains("done in") && s.contains("/help for commands")
    });
    assert!(s.lines().all(|l| l.chars().count() <= 60), "{s}");
    tty.keys("\x04");
    assert_eq!(tty.exit(), 0);
}

#[test]
fn a_resumed_session_longer_than_64_pages_shows_its_last_turn() {
    use magi_code::client::{Client, Update};
    use magi_code::wire::requests::EmptyParams;
    use magi_code::wire::results::SessionResult;
    use magi_code::wire::Call;
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    // Echo turns of ~16 KiB each: prompt and reply in 4,000-byte parts fill about one
    // 32 KiB page a turn, so 80 turns need more pages than a listing reads (64).
    let mut cmd = Client::command(Path::new(env!("CARGO_BIN_EXE_magi-code")));
    cmd.env("MC_HOME", home.path()).current_dir(cwd.path());
    let mut c = Client::spawn(cmd).unwrap();
    c.initialize(&["session.create", "turn.start", "shutdown"])
        .unwrap();
    let s: SessionResult = c.call(Call::SessionCreate(EmptyParams {})).unwrap();
    let sid = s.session_id;
    let filler = "word ".repeat(3_200);
    for i in 0..80 {
        let prompt = if i == 79 {
            "the LAST-TURN marker".to_owned()
        } else {
            format!("turn {i} {filler}")
        };
        let mut turn = c.start_turn(&sid, &prompt).unwrap();
        loop {
            let Some(e) = c.next_event(DEADLINE).unwrap() else {
                panic!("no event in turn {i}");
            };
            if turn.apply(&e).unwrap() == Update::Finished {
                break;
            }
        }
    }
    assert_eq!(c.shutdown(DEADLINE), 0);

    let mut tty = Tty::spawn(home.path(), cwd.path(), &["--session", &sid]);
    let s = tty.wait("the last turn", |s| {
        s.contains("/help for commands") && s.contains("the LAST-TURN marker")
    });
    assert!(!s.contains("goes on past what was read"), "{s}");
    tty.keys("\x04");
    assert_eq!(tty.exit(), 0);
}

#[test]
fn an_unanswered_approval_says_expired_and_the_call_did_not_run() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    use_script(
        home.path(),
        r#"{"turns":[
            {"steps":[{"text":"I will write it:\n"},
                      {"tool":{"name":"write_file","input":{"path":"a.txt","content":"x\n"}}},
                      {"text":"It was not allowed.\n"}]}]}"#,
    );
    let mut screens = Vec::new();
    let mut tty = Tty::spawn(home.path(), cwd.path(), &[]);
    tty.wait_for("/help for commands");
    tty.keys("write it\r");
    tty.wait_for("expires in");
    // Left unanswered until it expires: 60 s, the protocol's fixed `approval_expiry_ms`.
    let s = tty.wait_within(DEADLINE * 2, "the expiry", |s| s.contains("⊘ write_file"));
    assert!(
        s.contains("expired: write_file a.txt (2 bytes) was not answered in time"),
        "{s}"
    );
    assert!(
        s.contains("⊘ write_file a.txt (2 bytes) (expired: not answered in time)"),
        "{s}"
    );
    assert!(!s.contains("denied by the user"), "{s}");
    assert!(
        !s.contains("+0 -0"),
        "the unrun call's card is not shown: {s}"
    );
    assert!(!cwd.path().join("a.txt").exists());
    capture(&mut screens, "an approval left to expire", &s);
    let s = tty.wait_for("done in");
    assert!(s.contains("It was not allowed."), "{s}");
    save("expiry", &screens);
    tty.keys("\x04");
    assert_eq!(tty.exit(), 0);
}

#[test]
fn a_prompt_typed_during_a_turn_is_queued_and_sent_when_it_ends() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    use_script(
        home.path(),
        r#"{"turns":[
            {"steps":[{"text":"first reply, slowly"},
                      {"tool":{"name":"shell","input":{"command":"while [ ! -e go ]; do sleep 0.05; done"}}},
                      {"text":" and done\n"}]},
            {"steps":[{"text":"the QUEUED prompt was answered\n"}]}]}"#,
    );
    // The first turn lasts until the test creates `go` (no timer decides it).
    let path = home.path().join("settings.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    settings["tools"] = serde_json::json!({"shell": "allow"});
    std::fs::write(&path, settings.to_string()).unwrap();
    let mut screens = Vec::new();
    let mut tty = Tty::spawn(home.path(), cwd.path(), &[]);
    tty.wait_for("/help for commands");
    tty.keys("first\r");
    tty.wait_for("first reply, slowly");
    tty.keys("and then this\r");
    let s = tty.wait_for("queued › and then this");
    assert!(s.contains("(sent when the turn ends)"), "{s}");
    capture(&mut screens, "a prompt queued during a turn", &s);
    std::fs::write(cwd.path().join("go"), "").unwrap();
    let s = tty.wait("the queued prompt's turn", |s| {
        s.contains("the QUEUED prompt was answered") && s.matches("done in").count() == 2
    });
    let t = trimmed(&s);
    let first_end = t.find("done in").unwrap();
    let sent = t.find("› and then this").unwrap();
    assert!(first_end < sent, "sent after the first turn ended: {s}");
    assert!(!s.contains("queued ›"), "{s}");
    capture(&mut screens, "sent once the turn ended", &s);
    save("queue", &screens);
    tty.keys("\x04");
    assert_eq!(tty.exit(), 0);
}

#[test]
fn refusals_are_said_in_words_and_model_explains_the_catalog() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let mut tty = Tty::spawn(home.path(), cwd.path(), &[]);
    let sid = session_of(&tty.wait_for("/help for commands"));
    tty.keys("hello\r");
    tty.wait_for("done in");
    // On the default settings the catalog is empty: /model says why and how to fill it.
    tty.keys("/model\r");
    let s = tty.wait_for("no models are enabled");
    assert!(s.contains("providers.catalog.enabled"), "{s}");
    assert!(
        s.contains(r#"{"providers": {"catalog": {"enabled": ["scripted/echo"]}}}"#),
        "{s}"
    );
    assert!(
        s.contains("the current model, echo, works without it"),
        "{s}"
    );
    tty.keys("/open nosuchsession\r");
    tty.wait_for("[open refused: there is no saved session with that ID here (session_missing)]");
    tty.keys("\x04");
    assert_eq!(tty.exit(), 0);

    // The session belongs to `cwd`: opened from another folder, the refusal says so.
    let tty = Tty::spawn(home.path(), other.path(), &["--session", &sid]);
    let s = tty.wait_for("(cwd_mismatch)");
    assert!(
        s.contains("the session belongs to another folder: start the chat there (cwd_mismatch)"),
        "{s}"
    );
    assert_eq!(tty.exit(), 1);
}

#[test]
fn a_tool_shows_its_output_tail_and_a_write_approval_shows_the_diff() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    use_script(
        home.path(),
        r#"{"turns":[
            {"steps":[{"tool":{"name":"shell","input":{"command":"for i in $(seq 1 12); do echo row-$i; done"}}},
                      {"tool":{"name":"shell","input":{"command":"echo on-stderr >&2; exit 3"}}},
                      {"tool":{"name":"write_file","input":{"path":"notes.txt","content":"alpha\nBETA\ngamma\ndelta\n"}}},
                      {"text":"both done\n"}]}]}"#,
    );
    // Shell calls run without asking; the write asks.
    let path = home.path().join("settings.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    settings["tools"] = serde_json::json!({"shell": "allow"});
    std::fs::write(&path, settings.to_string()).unwrap();
    let mut screens = Vec::new();
    let mut tty = Tty::spawn(home.path(), cwd.path(), &[]);
    tty.wait_for("/help for commands");
    // Room for all of it on one screen.
    tty.resize(50, COLS);
    tty.keys("go\r");
    let s = tty.wait_for("Allow write_file");
    // Each shell's line, its card, then the tail of what it printed (stdout and stderr).
    let t = trimmed(&s);
    assert!(t.contains("✓ shell"), "{s}");
    assert!(
        t.contains("… 12 lines, 75 bytes; the last 8:\n  │ row-5\n"),
        "{s}"
    );
    assert!(t.contains("│ row-11\n  │ row-12\n"), "{s}");
    assert!(!t.contains("│ row-4\n"), "only the tail: {s}");
    assert!(t.contains("✗ shell"), "{s}");
    assert!(t.contains("exit 3"), "{s}");
    assert!(t.contains("│ on-stderr"), "{s}");
    // The proposed change, coloured, above the dialog, and its counts in it.
    assert!(
        t.contains("--- a/notes.txt\n  +++ b/notes.txt\n  @@ -1,3 +1,4 @@\n   alpha\n  -beta\n  +BETA\n   gamma\n  +delta"),
        "{s}"
    );
    assert!(
        s.contains("edit notes.txt +2 -1 (the diff is above)"),
        "{s}"
    );
    assert_eq!(
        tty.cell("+BETA", vt100::Cell::fgcolor),
        Some(vt100::Color::Idx(2)),
        "added lines are green"
    );
    assert_eq!(
        tty.cell("-beta", vt100::Cell::fgcolor),
        Some(vt100::Color::Idx(1))
    );
    assert_eq!(
        std::fs::read_to_string(cwd.path().join("notes.txt")).unwrap(),
        "alpha\nbeta\ngamma\n",
        "nothing is written before the answer"
    );
    capture(
        &mut screens,
        "a shell tail and a write approval with its diff",
        &s,
    );
    tty.keys("y\r");
    let s = tty.wait_for("done in");
    assert!(s.contains("notes.txt +2 -1"), "{s}");
    assert!(s.contains("both done"), "{s}");
    assert!(
        !s.contains("│ wrote 23 bytes"),
        "a tail the tool line already says is not repeated: {s}"
    );
    capture(&mut screens, "after the write", &s);
    save("details", &screens);
    tty.keys("\x04");
    assert_eq!(tty.exit(), 0);
}

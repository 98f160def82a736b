//! `magi-code chat`: a terminal client for people, with streaming replies, tool activity,
//! approval prompts, Ctrl-C to stop a turn, and commands to list and switch sessions.

use super::client::{serve_command, Frames, Server};
use super::interrupt;
use serde_json::{json, Value};
use std::io::{BufRead, IsTerminal, Write};
use std::os::unix::process::CommandExt;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How often the chat looks at Ctrl-C and the waiting indicator while it waits.
const TICK: Duration = Duration::from_millis(100);
/// How long a turn may be silent before the waiting indicator shows.
const INDICATOR_AFTER: Duration = Duration::from_millis(300);
/// How long the server gets to answer `shutdown` and exit before it is killed.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// Most `session.list` pages read for one `/sessions` (the listing holds at most 256).
const LIST_PAGES: usize = 16;
/// The waiting indicator's frames.
const SPINNER: [char; 4] = ['|', '/', '-', '\\'];

const HELP: &str = "\
/help        this list
/sessions    the sessions of this folder: id, title, last update, eligibility
/open ID     switch to session ID
/quit        leave (end of input does too)
Ctrl-C       stop the running turn; at the prompt, or pressed twice, leave";

/// A terminal chat for people: spawns `serve --stdio`, creates (or, with `session`, opens) a
/// session, and sends each input line as a turn, printing the reply as it streams. Approval
/// requests are asked on the terminal (default deny). `/quit` or end of input stops. Exit
/// code 1 when the server failed, or when input is not a terminal and a turn or command
/// failed or was refused.
pub fn chat(session: Option<&str>) -> i32 {
    // Before the server starts, so a session it attaches is never one the sweep looks at.
    super::retention::sweep(session);
    let stdin_tty = std::io::stdin().is_terminal();
    let tty = std::io::stdout().is_terminal();
    let style = Style {
        tty,
        color: tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    // Its own process group: Ctrl-C on the terminal reaches the chat only, which then asks
    // the server to cancel or shut down instead of losing it mid-write.
    let mut cmd = match std::env::current_exe() {
        Ok(exe) => serve_command(&exe),
        Err(_) => return start_failed(),
    };
    cmd.process_group(0);
    let Ok(mut server) = Server::spawn(cmd) else {
        return start_failed();
    };
    let Some(frames) = server.frames().map(Frames::into_channel) else {
        return 1;
    };
    let Some(lines) = read_lines() else {
        let _ = server.child.kill();
        let _ = server.child.wait();
        return start_failed();
    };
    if !interrupt::install() {
        eprintln!("magi-code chat: Ctrl-C cannot stop a turn here; it ends the chat");
    }
    let mut chat = Chat {
        server,
        frames,
        lines,
        n: 0,
        sid: String::new(),
        style,
        stdin_tty,
        failed: false,
    };
    let code = chat.run(session);
    chat.finish(code)
}

fn start_failed() -> i32 {
    eprintln!("magi-code chat: could not start the server");
    1
}

/// Input lines from a thread of their own, so that waiting for one never blocks Ctrl-C.
fn read_lines() -> Option<Receiver<String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("chat-stdin".to_owned())
        .spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
        .ok()?;
    Some(rx)
}

/// What the terminal can show.
struct Style {
    /// Stdout is a terminal (the waiting indicator may show).
    tty: bool,
    /// Escapes may colour the output (a terminal, and `NO_COLOR` unset or empty).
    color: bool,
}

impl Style {
    fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }

    fn red(&self, s: &str) -> String {
        self.paint("31", s)
    }

    fn paint(&self, sgr: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{sgr}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }
}

/// Text from the server as the terminal may show it: no control characters but LF and tab,
/// so a reply cannot move the cursor or recolour the terminal.
fn printable(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect()
}

fn field<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// A finished `tool.cards` card as one line under its activity: the command and its exit
/// code, a file's line counts, matches found. Running cards show nothing (the activity did).
fn card_line(card: &Value) -> Option<String> {
    let count = |k: &str| card[k].as_u64();
    let status = field(card, "status");
    let text = match field(card, "kind") {
        _ if status == "running" || status.is_empty() => return None,
        "command" => {
            let code = card["exit_code"]
                .as_i64()
                .map_or_else(|| "no exit code".to_owned(), |c| format!("exit {c}"));
            let took = count("duration_ms").map_or_else(String::new, |ms| format!(", {ms} ms"));
            format!("$ {} → {code}{took}", field(card, "command"))
        }
        "file_edit" => format!(
            "{} +{} -{}",
            field(card, "path"),
            count("added").unwrap_or(0),
            count("removed").unwrap_or(0)
        ),
        "file_read" => match count("lines") {
            Some(n) => format!("{}: {n} lines", field(card, "path")),
            None => format!("{}: {status}", field(card, "path")),
        },
        "search" => match count("matches") {
            Some(n) => format!("{}: {n} matches", field(card, "title")),
            None => format!("{}: {status}", field(card, "title")),
        },
        _ => format!("{}: {status}", field(card, "title")),
    };
    Some(format!("  {text}"))
}

fn flush() {
    let _ = std::io::stdout().flush();
}

/// One line of input, or why there is none.
enum Line {
    Text(String),
    Eof,
    Interrupted,
}

/// Whether the chat goes on after a turn.
#[derive(PartialEq, Eq)]
enum After {
    Prompt,
    Quit,
}

/// Where a turn's cancellation stands.
#[derive(PartialEq, Eq)]
enum Cancel {
    No,
    /// Asked for before the run ID was known.
    Wanted,
    Sent,
}

/// What a running turn has shown.
struct Screen {
    /// The cursor is not at the start of a line.
    mid_line: bool,
    /// Anything but the waiting indicator was shown.
    produced: bool,
    /// The indicator frame on screen, if any.
    spinner: Option<usize>,
}

impl Screen {
    /// Takes the waiting indicator off the screen.
    fn clear(&mut self) {
        if self.spinner.take().is_some() {
            print!("\x08 \x08");
        }
    }

    /// Clears the indicator and starts a new line unless at one.
    fn line_start(&mut self) {
        self.clear();
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }

    fn tick(&mut self) {
        let k = self.spinner.map_or(0, |k| (k + 1) % SPINNER.len());
        if self.spinner.is_some() {
            print!("\x08");
        }
        print!("{}", SPINNER[k]);
        flush();
        self.spinner = Some(k);
    }
}

struct Chat {
    server: Server,
    frames: Receiver<Value>,
    lines: Receiver<String>,
    n: u32,
    sid: String,
    style: Style,
    stdin_tty: bool,
    /// A turn or command failed or was refused.
    failed: bool,
}

impl Chat {
    fn send(&mut self, method: &str, params: &Value) -> Option<String> {
        self.n += 1;
        let id = format!("c{}", self.n);
        self.server.send(&id, method, params).ok()?;
        Some(id)
    }

    /// The response to `id` (events meanwhile are dropped); None once the server is gone or
    /// past `within`.
    fn wait(&self, id: &str, within: Option<Duration>) -> Option<Value> {
        let end = within.map(|d| Instant::now() + d);
        loop {
            let left = end.map_or(TICK, |e| e.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return None;
            }
            match self.frames.recv_timeout(left.min(TICK)) {
                Ok(f) if f["id"] == id => return Some(f),
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    fn request(&mut self, method: &str, params: &Value) -> Option<Value> {
        let id = self.send(method, params)?;
        self.wait(&id, None)
    }

    /// The next input line, polling Ctrl-C meanwhile.
    fn line(&self) -> Line {
        loop {
            if interrupt::take() {
                return Line::Interrupted;
            }
            match self.lines.recv_timeout(TICK) {
                Ok(l) => return Line::Text(l),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Line::Eof,
            }
        }
    }

    fn error_line(&mut self, text: &str) {
        self.failed = true;
        println!("{}", self.style.red(&printable(text)));
    }

    /// Initializes, attaches, then reads prompts and commands until the end; Some(code) when
    /// the chat must exit with it before any prompt.
    fn run(&mut self, session: Option<&str>) -> Option<i32> {
        let caps = json!({"required_capabilities": ["session.create", "session.open", "session.list", "turn.start", "turn.cancel", "approval.answer", "shutdown", "tool.cards"]});
        let init = self.request("initialize", &caps);
        match init.as_ref().map(|f| &f["error"]["code"]) {
            None => {
                eprintln!("magi-code chat: the server did not answer");
                return Some(1);
            }
            Some(Value::String(code)) => {
                eprintln!("magi-code chat: initialization failed: {}", printable(code));
                return Some(1);
            }
            Some(_) => {}
        }
        let attach = match session {
            Some(sid) => self.request("session.open", &json!({"session_id": sid})),
            None => self.request("session.create", &json!({})),
        };
        let Some(sid) = attach
            .as_ref()
            .and_then(|f| f["result"]["session_id"].as_str())
        else {
            let code = attach
                .as_ref()
                .and_then(|f| f["error"]["code"].as_str())
                .unwrap_or("no answer");
            eprintln!(
                "magi-code chat: could not attach a session: {}",
                printable(code)
            );
            return Some(1);
        };
        self.sid = sid.to_owned();
        println!(
            "session {} (saved once a reply starts; reopen with `magi-code chat --session {}`; /help lists commands)",
            self.sid, self.sid
        );
        loop {
            print!("you> ");
            flush();
            let line = match self.line() {
                Line::Text(l) => l,
                Line::Eof => break,
                Line::Interrupted => {
                    println!();
                    break;
                }
            };
            let line = line.trim();
            let (cmd, arg) = line.split_once(' ').unwrap_or((line, ""));
            match cmd {
                "" => {}
                "/quit" => break,
                "/help" => println!("{HELP}"),
                "/sessions" => self.sessions(),
                "/open" => self.open(arg.trim()),
                _ if cmd.starts_with('/') => {
                    self.error_line(&format!("unknown command {cmd}; /help lists them"));
                }
                _ => {
                    if self.turn(line) == After::Quit {
                        break;
                    }
                }
            }
        }
        None
    }

    /// One turn: streams its reply, activity and approvals until `run.finished`.
    fn turn(&mut self, prompt: &str) -> After {
        let params = json!({"session_id": self.sid, "prompt": prompt});
        let Some(start) = self.send("turn.start", &params) else {
            self.error_line("[the server stopped]");
            return After::Quit;
        };
        print!("magi> ");
        flush();
        let began = Instant::now();
        let mut screen = Screen {
            mid_line: true,
            produced: false,
            spinner: None,
        };
        let mut run_id: Option<String> = None;
        let mut cancel = Cancel::No;
        loop {
            if interrupt::take() {
                if cancel != Cancel::No {
                    screen.line_start();
                    return After::Quit;
                }
                cancel = Cancel::Wanted;
                screen.line_start();
                println!("{}", self.style.dim("[stopping; Ctrl-C again leaves]"));
            }
            if cancel == Cancel::Wanted {
                if let Some(run) = &run_id {
                    let params = json!({"session_id": self.sid, "run_id": run});
                    self.send("turn.cancel", &params);
                    cancel = Cancel::Sent;
                }
            }
            let f = match self.frames.recv_timeout(TICK) {
                Ok(f) => f,
                Err(RecvTimeoutError::Timeout) => {
                    if self.style.tty && !screen.produced && began.elapsed() >= INDICATOR_AFTER {
                        screen.tick();
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    screen.line_start();
                    self.error_line("[the server stopped]");
                    return After::Quit;
                }
            };
            if f["id"] == start.as_str() {
                if let Some(code) = f["error"]["code"].as_str() {
                    screen.line_start();
                    self.error_line(&format!("[turn refused: {code}]"));
                    return After::Prompt;
                }
                run_id = f["result"]["run_id"].as_str().map(str::to_owned);
                continue;
            }
            if !f["id"].is_null() {
                // Answers to turn.cancel and approval.answer: the events tell the rest.
                continue;
            }
            let data = &f["data"];
            match f["event"].as_str() {
                Some("message.delta") => {
                    screen.clear();
                    screen.produced = true;
                    let text = printable(field(data, "text"));
                    if !text.is_empty() {
                        screen.mid_line = !text.ends_with('\n');
                    }
                    print!("{text}");
                    flush();
                }
                Some("activity") => {
                    screen.line_start();
                    screen.produced = true;
                    let line = format!(
                        "[{} {}: {}]",
                        data["name"].as_str().unwrap_or("tool"),
                        field(data, "state"),
                        field(data, "summary")
                    );
                    println!("{}", self.style.dim(&printable(&line)));
                }
                Some("tool.card") => {
                    if let Some(line) = card_line(&data["card"]) {
                        screen.line_start();
                        println!("{}", self.style.dim(&printable(&line)));
                    }
                }
                Some("diagnostic") => {
                    screen.line_start();
                    let line = format!("[{}: {}]", field(data, "code"), field(data, "summary"));
                    println!("{}", self.style.dim(&printable(&line)));
                }
                Some("approval.requested") => {
                    screen.line_start();
                    screen.produced = true;
                    let summary = data["summary"].as_str().unwrap_or("this tool call");
                    print!("allow {}? [y/N] ", printable(summary));
                    flush();
                    let allow = match self.line() {
                        Line::Text(a) => a.trim().eq_ignore_ascii_case("y"),
                        Line::Eof => false,
                        Line::Interrupted if cancel != Cancel::No => {
                            println!();
                            return After::Quit;
                        }
                        Line::Interrupted => {
                            cancel = Cancel::Wanted;
                            println!();
                            println!("{}", self.style.dim("[stopping; Ctrl-C again leaves]"));
                            false
                        }
                    };
                    // A terminal echoes the answer's LF; a pipe does not.
                    screen.mid_line = !self.stdin_tty;
                    let params = json!({"session_id": self.sid, "run_id": data["run_id"], "approval_id": data["approval_id"], "allow": allow});
                    self.send("approval.answer", &params);
                }
                Some("run.finished") => {
                    screen.line_start();
                    match (field(data, "outcome"), data["error_code"].as_str()) {
                        ("completed", _) => {}
                        ("cancelled", _) => println!("{}", self.style.dim("[cancelled]")),
                        (outcome, code) => {
                            self.error_line(&format!("[{outcome}: {}]", code.unwrap_or("-")));
                        }
                    }
                    return After::Prompt;
                }
                _ => {}
            }
        }
    }

    /// `/sessions`: every page of `session.list`.
    fn sessions(&mut self) {
        let mut params = json!({});
        let mut shown = 0usize;
        for _ in 0..LIST_PAGES {
            let Some(f) = self.request("session.list", &params) else {
                self.error_line("[the server did not answer]");
                return;
            };
            if let Some(code) = f["error"]["code"].as_str() {
                self.error_line(&format!("[sessions: {code}]"));
                return;
            }
            let r = &f["result"];
            for s in r["sessions"].as_array().into_iter().flatten() {
                let id = field(s, "session_id");
                let mark = if id == self.sid { "  (this chat)" } else { "" };
                let line = format!(
                    "{id}  {}  {}  {}{mark}",
                    s["title"].as_str().unwrap_or("(untitled)"),
                    s["updated_at"].as_str().unwrap_or("(empty)"),
                    field(s, "eligibility"),
                );
                println!("{}", printable(&line));
                shown += 1;
            }
            match r["next_cursor"].as_str() {
                Some(cursor) if r["complete"] != true => {
                    params = json!({"revision": r["revision"], "cursor": cursor});
                }
                _ => break,
            }
        }
        if shown == 0 {
            println!("no saved sessions in this folder");
        }
    }

    /// `/open ID`: attaches another session; the current one stays on failure.
    fn open(&mut self, id: &str) {
        if id.is_empty() {
            self.error_line("usage: /open ID");
            return;
        }
        let Some(f) = self.request("session.open", &json!({"session_id": id})) else {
            self.error_line("[the server did not answer]");
            return;
        };
        match (
            f["result"]["session_id"].as_str(),
            f["error"]["code"].as_str(),
        ) {
            (Some(sid), _) => {
                self.sid = sid.to_owned();
                println!("session {sid} opened");
            }
            (None, code) => {
                self.error_line(&format!("[open refused: {}]", code.unwrap_or("no answer")));
            }
        }
    }

    /// Shuts the server down (killing it when it does not exit in time) and picks the exit
    /// code.
    fn finish(mut self, early: Option<i32>) -> i32 {
        if let Some(id) = self.send("shutdown", &json!({})) {
            let _ = self.wait(&id, Some(SHUTDOWN_WAIT));
        }
        self.server.close();
        let end = Instant::now() + SHUTDOWN_WAIT;
        let code = loop {
            match self.server.child.try_wait() {
                Ok(Some(status)) => break status.code().unwrap_or(1),
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = self.server.child.kill();
                    let _ = self.server.child.wait();
                    break 1;
                }
            }
        };
        match early {
            Some(c) => c,
            None if code != 0 => code,
            None if self.failed && !self.stdin_tty => 1,
            None => 0,
        }
    }
}

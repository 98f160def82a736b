//! `magi-code chat`: a terminal client for people, with streaming replies, tool activity,
//! approval prompts, Ctrl-C to stop a turn, and commands to list and switch sessions.

use super::chat_view::{flush, next_page, printable, word, Cells, Screen, Style};
use super::interrupt;
use crate::client::{Client, ClientError, Turn, Update};
use crate::wire::events::ApprovalRequestedData;
use crate::wire::requests::{
    ApprovalAnswerParams, SessionOpenParams, SnapshotPageParams, TurnCancelParams,
};
use crate::wire::results::{SessionListResult, SessionResult};
use crate::wire::{requests::EmptyParams, Call, Event};
use std::io::{BufRead, IsTerminal};
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
        Ok(exe) => Client::command(&exe),
        Err(_) => return start_failed(),
    };
    cmd.process_group(0);
    // A person at a terminal gets the terminal UI, which shows the server's stderr in its
    // scrollback instead of letting it write over the screen; pipes keep the line protocol.
    let terminal = stdin_tty && tty;
    let mut server_err = None;
    if terminal {
        if let Ok((r, w)) = std::io::pipe() {
            cmd.stderr(w);
            server_err = Some(r);
        }
    }
    let Ok(mut client) = Client::spawn(cmd) else {
        return start_failed();
    };
    // People take their time; the child answers or goes, and either ends the wait.
    client.set_wait(None);
    if terminal {
        return super::tui::run(client, session, server_err);
    }
    let Some(lines) = read_lines() else {
        client.kill();
        return start_failed();
    };
    if !interrupt::install() {
        eprintln!("magi-code chat: Ctrl-C cannot stop a turn here; it ends the chat");
    }
    let mut chat = Chat {
        client,
        lines,
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

/// One line of input, or why there is none.
enum Line {
    Text(String),
    Eof,
    Interrupted,
}

/// A running turn and what it has shown.
struct Running {
    turn: Turn,
    began: Instant,
    screen: Screen,
    cells: Cells,
    /// `turn.cancel` was sent (a second Ctrl-C leaves).
    cancelling: bool,
}

/// Whether the chat goes on after a turn.
#[derive(PartialEq, Eq)]
enum After {
    Prompt,
    Quit,
}

struct Chat {
    client: Client,
    lines: Receiver<String>,
    sid: String,
    style: Style,
    stdin_tty: bool,
    /// A turn or command failed or was refused.
    failed: bool,
}

/// The code of a refusal, or what else ended the wait.
fn why(e: &ClientError) -> &str {
    e.code().unwrap_or("no answer")
}

impl Chat {
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
        let caps = [
            "session.create",
            "session.open",
            "session.list",
            "turn.start",
            "turn.cancel",
            "approval.answer",
            "shutdown",
            "tool.cards",
        ];
        match self.client.initialize(&caps) {
            Ok(_) => {}
            Err(ClientError::Rejected(e)) => {
                eprintln!(
                    "magi-code chat: initialization failed: {}",
                    printable(&e.code)
                );
                // The code names no cause: the doctor's findings do.
                let findings =
                    crate::startup::doctor::check(&crate::startup::LaunchEnv::from_process());
                super::doctor::print(&findings, &mut std::io::stderr());
                return Some(1);
            }
            Err(_) => {
                eprintln!("magi-code chat: the server did not answer");
                return Some(1);
            }
        }
        let attach: Result<SessionResult, _> = match session {
            Some(sid) => self.client.call(Call::SessionOpen(SessionOpenParams {
                session_id: sid.to_owned(),
            })),
            None => self.client.call(Call::SessionCreate(EmptyParams {})),
        };
        let sid = match attach {
            Ok(r) => r.session_id,
            Err(e) => {
                let code = crate::client::words::said(why(&e));
                eprintln!("magi-code chat: could not attach a session: {code}");
                return Some(1);
            }
        };
        self.sid = sid;
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
        let turn = match self.client.start_turn(&self.sid, prompt) {
            Ok(turn) => turn,
            Err(ClientError::Rejected(e)) => {
                self.error_line(&format!(
                    "[turn refused: {}]",
                    crate::client::words::said(&e.code)
                ));
                return After::Prompt;
            }
            Err(_) => {
                self.error_line("[the server stopped]");
                return After::Quit;
            }
        };
        print!("magi> ");
        flush();
        let mut run = Running {
            turn,
            began: Instant::now(),
            screen: Screen::new(),
            cells: Cells::default(),
            cancelling: false,
        };
        loop {
            if interrupt::take() {
                run.screen.line_start();
                if run.cancelling {
                    return After::Quit;
                }
                run.cancelling = true;
                println!("{}", self.style.dim("[stopping; Ctrl-C again leaves]"));
                self.cancel(&run.turn);
            }
            let e = match self.client.next_event(TICK) {
                Ok(Some(e)) => e,
                Ok(None) => {
                    let quiet = !run.screen.produced && run.began.elapsed() >= INDICATOR_AFTER;
                    if self.style.tty && quiet {
                        run.screen.tick();
                    }
                    continue;
                }
                Err(_) => {
                    run.screen.line_start();
                    self.error_line("[the server stopped]");
                    return After::Quit;
                }
            };
            let Ok(update) = run.turn.apply(&e) else {
                run.screen.line_start();
                self.error_line("[the server broke the protocol]");
                return After::Quit;
            };
            if let Some(after) = self.on_event(&mut run, e, update) {
                return after;
            }
        }
    }

    /// Shows one event of a running turn; Some when the turn is over for the chat.
    fn on_event(&mut self, run: &mut Running, e: Event, update: Update) -> Option<After> {
        let screen = &mut run.screen;
        match (e, update) {
            (_, Update::Delta { text, .. }) => {
                screen.clear();
                screen.produced = true;
                screen.show(&printable(&text));
            }
            (_, Update::Reconciled { text, shown, .. }) => {
                screen.produced = true;
                // The reconciled text replaces what the deltas showed: what is missing is
                // added, and a reply that differs is shown again whole.
                match text.strip_prefix(shown.as_str()) {
                    Some(rest) => screen.show(&printable(rest)),
                    None => {
                        screen.line_start();
                        screen.show(&printable(&text));
                    }
                }
            }
            (Event::Activity(a), _) => {
                screen.line_start();
                screen.produced = true;
                if let Some(line) = run.cells.activity(&a) {
                    println!("{}", self.style.dim(&printable(&line)));
                }
            }
            (Event::ToolCard(c), _) => {
                let card = serde_json::to_value(&c.card).unwrap_or_default();
                if let Some(line) = run.cells.card(&c.activity_id, &card) {
                    screen.line_start();
                    println!("{}", self.style.dim(&printable(&line)));
                }
            }
            (Event::Diagnostic(d), _) => {
                screen.line_start();
                let line = format!("[{}: {}]", d.code, d.summary);
                println!("{}", self.style.dim(&printable(&line)));
            }
            (Event::ApprovalRequested(a), _) => return self.approval(run, a),
            (Event::RunFinished(d), _) => {
                screen.line_start();
                match (word(&d.outcome).as_str(), d.error_code) {
                    ("completed", _) => {}
                    ("cancelled", _) => println!("{}", self.style.dim("[cancelled]")),
                    (outcome, code) => {
                        let code = code.unwrap_or_else(|| "-".to_owned());
                        self.error_line(&format!("[{outcome}: {code}]"));
                    }
                }
                return Some(After::Prompt);
            }
            _ => {}
        }
        None
    }

    /// Asks the person about `a` (default deny) and sends the answer; Some(Quit) when Ctrl-C
    /// came twice.
    fn approval(&mut self, run: &mut Running, a: ApprovalRequestedData) -> Option<After> {
        let screen = &mut run.screen;
        screen.line_start();
        screen.produced = true;
        let indent = run.cells.approval_indent(&a.summary);
        print!("{indent}allow {}? [y/N] ", printable(&a.summary));
        flush();
        let allow = match self.answer(indent) {
            Ok(a) => a,
            Err(Line::Eof | Line::Text(_)) => false,
            Err(Line::Interrupted) if run.cancelling => {
                println!();
                return Some(After::Quit);
            }
            Err(Line::Interrupted) => {
                run.cancelling = true;
                println!();
                println!("{}", self.style.dim("[stopping; Ctrl-C again leaves]"));
                self.cancel(&run.turn);
                false
            }
        };
        // A terminal echoes the answer's LF; a pipe does not.
        run.screen.mid_line = !self.stdin_tty;
        let _ = self
            .client
            .send_detached(Call::ApprovalAnswer(ApprovalAnswerParams {
                session_id: self.sid.clone(),
                run_id: a.run_id,
                approval_id: a.approval_id,
                allow,
            }));
        None
    }

    /// Reads a yes/no answer: `y`/`yes` allow, `n`/`no` or an empty line deny (any case);
    /// anything else asks again. `Err` carries the end of input or a Ctrl-C.
    fn answer(&mut self, indent: &str) -> Result<bool, Line> {
        loop {
            match self.line() {
                Line::Text(a) => match a.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => return Ok(true),
                    "n" | "no" | "" => return Ok(false),
                    _ => {
                        print!("{indent}please answer y or n [y/N] ");
                        flush();
                    }
                },
                other => return Err(other),
            }
        }
    }

    /// Asks the server to stop `turn` (its answer does not matter: `run.finished` tells).
    fn cancel(&mut self, turn: &Turn) {
        let _ = self
            .client
            .send_detached(Call::TurnCancel(TurnCancelParams {
                session_id: self.sid.clone(),
                run_id: turn.run_id().to_owned(),
            }));
    }

    /// `/sessions`: every page of `session.list`.
    fn sessions(&mut self) {
        let mut params = SnapshotPageParams::default();
        let mut shown = 0usize;
        for _ in 0..LIST_PAGES {
            let r: SessionListResult = match self.client.call(Call::SessionList(params)) {
                Ok(r) => r,
                Err(ClientError::Rejected(e)) => {
                    self.error_line(&format!(
                        "[sessions: {}]",
                        crate::client::words::said(&e.code)
                    ));
                    return;
                }
                Err(_) => {
                    self.error_line("[the server did not answer]");
                    return;
                }
            };
            for s in &r.sessions {
                let id = &s.session_id;
                let mark = if *id == self.sid { "  (this chat)" } else { "" };
                let line = format!(
                    "{id}  {}  {}  {}{mark}",
                    s.title.as_deref().unwrap_or("(untitled)"),
                    s.updated_at.as_deref().unwrap_or("(empty)"),
                    word(&s.eligibility),
                );
                println!("{}", printable(&line));
                shown += 1;
            }
            match next_page(r.revision, r.next_cursor, r.complete) {
                Some(next) => params = next,
                None => break,
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
        let open = Call::SessionOpen(SessionOpenParams {
            session_id: id.to_owned(),
        });
        match self.client.call::<SessionResult>(open) {
            Ok(r) => {
                println!("session {} opened", r.session_id);
                self.sid = r.session_id;
            }
            Err(ClientError::Rejected(e)) => {
                self.error_line(&format!(
                    "[open refused: {}]",
                    crate::client::words::said(&e.code)
                ));
            }
            Err(_) => self.error_line("[the server did not answer]"),
        }
    }

    /// Shuts the server down (killing it when it does not exit in time) and picks the exit
    /// code.
    fn finish(mut self, early: Option<i32>) -> i32 {
        let code = self.client.shutdown(SHUTDOWN_WAIT);
        match early {
            Some(c) => c,
            None if code != 0 => code,
            None if self.failed && !self.stdin_tty => 1,
            None => 0,
        }
    }
}

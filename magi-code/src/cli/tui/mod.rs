//! `magi-code chat` on a terminal: ratatui and crossterm with an inline viewport, so finished
//! lines go into the terminal's own scrollback (and stay after the chat ends) while the live
//! area below them holds the streaming line, running tools, the approval dialog, the prompt
//! editor and the status line. [`app::ChatApp`] is the state, sans IO; this module is the
//! thin loop around it: raw mode, bracketed paste, a key reader thread and the client.

pub mod app;
mod commands;
pub mod dialog;
pub mod editor;
pub mod live;
pub mod markdown;
mod render;
pub mod transcript;

use crate::client::{Client, ClientError};
use crate::wire::requests::{ApprovalAnswerParams, TurnCancelParams};
use crate::wire::Call;
use app::{Action, ChatApp};
use commands::Commands;
use crossterm::event::{
    self, DisableBracketedPaste, EnableBracketedPaste, Event as TermEvent, KeyCode, KeyEvent,
    KeyModifiers, KeyboardEnhancementFlags, PopKeyboardEnhancementFlags,
    PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{disable_raw_mode, enable_raw_mode};
use ratatui::backend::CrosstermBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::io::{self, BufRead, PipeReader, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most bytes of the server's stderr shown as one line.
const STDERR_LINE_BYTES: u64 = 4096;
/// Rows of the live area.
const LIVE_ROWS: u16 = 12;
/// How long one wait for a server event or a key lasts.
const TICK: Duration = Duration::from_millis(25);
/// How long the idle chat waits for a key before it looks at the server again: a key ends
/// the wait at once, and nothing on screen moves between turns but the server's rare events.
const IDLE_TICK: Duration = Duration::from_millis(250);
/// How long the child's last stderr lines are waited for after it exited.
const STDERR_WAIT: Duration = Duration::from_millis(500);
/// How long after a turn the title is looked for again.
const TITLE_WAIT: Duration = Duration::from_millis(1500);
/// How long the server gets to answer `shutdown` and exit before it is killed.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// The capabilities the terminal chat uses.
const CAPS: [&str; 13] = [
    "session.create",
    "session.open",
    "session.list",
    "history.page",
    "model.catalog",
    "selection.set",
    "turn.start",
    "turn.cancel",
    "approval.answer",
    "shutdown",
    "tool.cards",
    "tool.details",
    "status",
];

type Term = Terminal<CrosstermBackend<Stdout>>;

/// Keyboard enhancement flags were pushed (and must be popped on the way out).
static ENHANCED: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back: cooked mode, no bracketed paste or keyboard enhancement, the
/// cursor shown.
fn restore() {
    if ENHANCED.swap(false, Ordering::SeqCst) {
        let _ = crossterm::execute!(io::stdout(), PopKeyboardEnhancementFlags);
    }
    let _ = disable_raw_mode();
    let _ = crossterm::execute!(io::stdout(), DisableBracketedPaste, crossterm::cursor::Show);
}

/// Restores the terminal when dropped, on every way out of the loop.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore();
    }
}

/// Runs the terminal chat over `client` (spawned, not initialized), attaching `session` or
/// a new one; `server_err` is the child's stderr, if piped. The exit code.
pub fn run(client: Client, session: Option<&str>, server_err: Option<PipeReader>) -> i32 {
    let errs = server_err.and_then(|r| read_stderr(r).ok());
    let mut cmds = Commands::new(client, errs);
    match cmds.client.initialize(&CAPS) {
        Ok(_) => {}
        Err(ClientError::Rejected(e)) => {
            let code = crate::cli::chat_view::printable(&e.code);
            eprintln!("magi-code chat: initialization failed: {code}");
            let findings =
                crate::startup::doctor::check(&crate::startup::LaunchEnv::from_process());
            crate::cli::doctor::print(&findings, &mut io::stderr());
            return finish(cmds, 1);
        }
        Err(_) => {
            eprintln!("magi-code chat: the server did not answer");
            return finish(cmds, 1);
        }
    }
    let mut app = ChatApp::default();
    if let Err(code) = cmds.attach(&mut app, session) {
        // `code` is already in words (`commands::why`).
        eprintln!("magi-code chat: could not attach a session: {code}");
        return finish(cmds, 1);
    }
    let code = match terminal() {
        Ok(mut term) => {
            let hook = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                hook(info);
            }));
            let guard = Restore;
            // Without it a stray SIGINT would end the chat with the terminal still raw.
            crate::cli::interrupt::install();
            let code = Loop::new(&mut term, &mut app, &mut cmds).run();
            let _ = term.draw(|f| f.set_cursor_position(f.area().as_position()));
            drop(guard);
            if let Some(sid) = cmds.client.saved_session() {
                println!("reopen with `magi-code chat --session {sid}`");
            }
            code
        }
        Err(e) => {
            restore();
            eprintln!("magi-code chat: the terminal refused: {e}");
            1
        }
    };
    finish(cmds, code)
}

fn finish(mut cmds: Commands, code: i32) -> i32 {
    let exit = cmds.client.shutdown(SHUTDOWN_WAIT);
    // The child is gone: what it wrote last (a startup failure's cause) goes to stderr.
    // Bounded: a helper the child started may hold the pipe open a little longer.
    if let Some(errs) = &cmds.errs {
        let end = Instant::now() + STDERR_WAIT;
        while let Ok(line) = errs.recv_timeout(end.saturating_duration_since(Instant::now())) {
            eprintln!("{line}");
        }
    }
    if code != 0 {
        code
    } else {
        exit
    }
}

fn terminal() -> io::Result<Term> {
    enable_raw_mode()?;
    crossterm::execute!(io::stdout(), EnableBracketedPaste)?;
    // Where the terminal speaks the kitty keyboard protocol, Shift-Enter is told from Enter.
    // Asked before the key reader starts: the answer is read from the same input.
    if crossterm::terminal::supports_keyboard_enhancement().unwrap_or(false) {
        let flags = KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES;
        crossterm::execute!(io::stdout(), PushKeyboardEnhancementFlags(flags))?;
        ENHANCED.store(true, Ordering::SeqCst);
    }
    let rows = crossterm::terminal::size().map_or(LIVE_ROWS, |(_, h)| {
        LIVE_ROWS.min(h.saturating_sub(2)).max(4)
    });
    let options = TerminalOptions {
        viewport: Viewport::Inline(rows),
    };
    Terminal::with_options(CrosstermBackend::new(io::stdout()), options)
}

/// The server's stderr lines, from a thread of their own.
fn read_stderr(r: PipeReader) -> io::Result<Receiver<String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("chat-server-stderr".to_owned())
        .spawn(move || bounded_lines(io::BufReader::new(r), |l| tx.send(l).is_ok()))?;
    Ok(rx)
}

/// Hands each line of `r` to `each` (until it says stop), a line longer than
/// [`STDERR_LINE_BYTES`] as several: the chat never holds a whole unbounded line.
fn bounded_lines(mut r: impl BufRead, mut each: impl FnMut(String) -> bool) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match io::Read::take(&mut r, STDERR_LINE_BYTES).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(buf.strip_suffix(b"\n").unwrap_or(&buf));
        if !each(line.into_owned()) {
            return;
        }
    }
}

/// Terminal input from a thread of its own, each stamped with when it was read.
fn read_input(stop: Arc<AtomicBool>) -> io::Result<Receiver<(TermEvent, Instant)>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("chat-keys".to_owned())
        .spawn(move || {
            // Polling, not one blocking read: the reader lock is free between polls (a cursor
            // position query needs it), and the thread sees `stop` soon after the chat ends.
            while !stop.load(Ordering::SeqCst) {
                match event::poll(Duration::from_millis(50)) {
                    Ok(false) => {}
                    Ok(true) => match event::read() {
                        Ok(e) => {
                            if tx.send((e, Instant::now())).is_err() {
                                break;
                            }
                        }
                        Err(_) => break,
                    },
                    Err(_) => break,
                }
            }
        })?;
    Ok(rx)
}

/// Takes the colours off `buf` unless `color`.
fn uncolor(buf: &mut Buffer, color: bool) {
    if !color {
        for cell in &mut buf.content {
            cell.set_fg(Color::Reset).set_bg(Color::Reset);
        }
    }
}

/// The loop: keys and server events into the app, its actions out, its lines into the
/// scrollback, a frame per pass.
struct Loop<'a> {
    term: &'a mut Term,
    app: &'a mut ChatApp,
    cmds: &'a mut Commands,
    /// When to look for the title again: it is made after the first turn ends.
    title_at: Option<Instant>,
    /// Colours are on (`NO_COLOR` unset or empty); dim, bold and reverse stay either way.
    color: bool,
}

impl<'a> Loop<'a> {
    fn new(term: &'a mut Term, app: &'a mut ChatApp, cmds: &'a mut Commands) -> Self {
        Self {
            term,
            app,
            cmds,
            title_at: None,
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    fn run(&mut self) -> i32 {
        let stop = Arc::new(AtomicBool::new(false));
        let Ok(input) = read_input(stop.clone()) else {
            return 1;
        };
        let code = self.passes(&input);
        stop.store(true, Ordering::SeqCst);
        let _ = self.flush_lines();
        code
    }

    fn passes(&mut self, input: &Receiver<(TermEvent, Instant)>) -> i32 {
        loop {
            if self.flush_lines().is_err() {
                return 1;
            }
            let color = self.color;
            let drawn = self.term.draw(|f| {
                self.app.render(f);
                uncolor(f.buffer_mut(), color);
            });
            if drawn.is_err() {
                return 1;
            }
            let mut events = Vec::new();
            match input.recv_timeout(if self.app.running() {
                Duration::ZERO
            } else {
                IDLE_TICK
            }) {
                Ok(e) => events.push(e),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return 1,
            }
            events.extend(input.try_iter());
            // A SIGINT from outside (raw mode makes Ctrl-C a key) means Ctrl-C too.
            if crate::cli::interrupt::take() {
                let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
                events.push((TermEvent::Key(ctrl_c), Instant::now()));
            }
            for (e, at) in events {
                let action = match e {
                    TermEvent::Key(k) => self.app.on_key(k, at),
                    TermEvent::Paste(text) => {
                        self.app.on_paste(&text, at);
                        None
                    }
                    _ => None,
                };
                if let Some(Err(code)) = action.map(|a| self.act(a)) {
                    return code;
                }
            }
            if let Err(code) = self.server() {
                return code;
            }
            if let Some(prompt) = self.app.next_queued() {
                if let Err(code) = self.act(Action::Send(prompt)) {
                    return code;
                }
            }
            if let Some(errs) = &self.cmds.errs {
                let lines: Vec<Line<'static>> = errs
                    .try_iter()
                    .map(|l| Line::styled(crate::cli::chat_view::printable(&l), live::dim()))
                    .collect();
                self.app.print(lines);
            }
            let now = Instant::now();
            self.app.on_tick(now);
            if self.title_at.is_some_and(|t| now >= t) && !self.app.running() {
                self.title_at = None;
                self.cmds.refresh(self.app);
            }
        }
    }

    /// Reads server events (waiting a tick while a turn runs).
    fn server(&mut self) -> Result<(), i32> {
        let wait = if self.app.running() {
            TICK
        } else {
            Duration::ZERO
        };
        let mut wait = wait;
        loop {
            match self.cmds.client.next_event(wait) {
                Ok(Some(e)) => {
                    let was = self.app.running();
                    self.app.on_event(&e, Instant::now());
                    if was && !self.app.running() {
                        self.cmds.refresh(self.app);
                        if self.app.info.title.is_none() {
                            self.title_at = Some(Instant::now() + TITLE_WAIT);
                        }
                    }
                }
                Ok(None) => return Ok(()),
                Err(_) => {
                    self.app.error("[the server stopped]");
                    return Err(1);
                }
            }
            wait = Duration::ZERO;
        }
    }

    /// Carries out one action; Err(code) when the chat ends.
    fn act(&mut self, action: Action) -> Result<(), i32> {
        let sid = self.app.info.session.clone();
        let sent = match action {
            Action::Quit => return Err(0),
            Action::Send(prompt) => match self.cmds.client.start_turn(&sid, &prompt) {
                Ok(turn) => {
                    self.app.turn_started(turn.run_id(), Instant::now());
                    Ok(())
                }
                Err(ClientError::Rejected(e)) => {
                    self.app.error(&format!(
                        "[turn refused: {}]",
                        crate::client::words::said(&e.code)
                    ));
                    Ok(())
                }
                Err(e) => Err(e),
            },
            Action::Answer {
                run_id,
                approval_id,
                allow,
            } => {
                let params = ApprovalAnswerParams {
                    session_id: sid,
                    run_id,
                    approval_id,
                    allow,
                };
                self.cmds.client.send_detached(Call::ApprovalAnswer(params))
            }
            Action::Cancel(run_id) => {
                let params = TurnCancelParams {
                    session_id: sid,
                    run_id,
                };
                self.cmds.client.send_detached(Call::TurnCancel(params))
            }
            Action::Command(cmd, arg) => {
                self.cmds.run(self.app, &cmd, &arg);
                Ok(())
            }
        };
        sent.map_err(|_| {
            self.app.error("[the server stopped]");
            1
        })
    }

    /// Moves the app's finished lines into the terminal's scrollback.
    fn flush_lines(&mut self) -> io::Result<()> {
        let lines = self.app.take_lines();
        if lines.is_empty() {
            return Ok(());
        }
        let width = self.term.size()?.width;
        let rows: Vec<Line<'static>> = lines
            .into_iter()
            .flat_map(|l| render::wrap(l, width))
            .collect();
        for chunk in rows.chunks(64) {
            let h = chunk.len() as u16;
            let color = self.color;
            self.term.insert_before(h, |buf| {
                Paragraph::new(chunk.to_vec()).render(buf.area, buf);
                uncolor(buf, color);
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

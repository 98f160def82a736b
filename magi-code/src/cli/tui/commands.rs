//! The terminal chat's requests besides turns: attaching a session and showing its saved
//! conversation, `/sessions`, `/open`, `/new`, `/model`, `/effort`, and the status line's
//! model, effort and title.

use super::app::ChatApp;
use super::live::dim;
use super::transcript;
use crate::cli::chat_view::{next_page, printable, word};
use crate::client::{Client, ClientError};
use crate::wire::requests::{
    EffortLevel, EffortRequest, EmptyParams, HistoryPageParams, SelectionSetParams,
    SessionOpenParams, SnapshotPageParams,
};
use crate::wire::results::{
    Choice, EntryKind, HistoryPageResult, ModelCatalogResult, SelectionSetResult, SessionEntry,
    SessionListResult, SessionResult, Status,
};
use crate::wire::Call;
use ratatui::text::{Line, Span};
use std::sync::mpsc::Receiver;

/// Most pages read for one listing or catalog (each is bounded by the server).
const PAGES: usize = 64;
/// Most `history.page` pages read for one transcript: more than a whole snapshot can take
/// (8 MiB or 10,000 parts, in pages of at most 32 KiB holding at least eight 4,000-byte
/// parts), so a saved conversation is never cut short silently.
const HISTORY_PAGES: usize = 2_048;

/// A refusal in words with its code, or what else ended the wait.
fn why(e: &ClientError) -> String {
    crate::client::words::said(e.code().unwrap_or("no answer"))
}

/// The chat's connection and what it knows of the selection.
pub struct Commands {
    /// The client of the `serve --stdio` child.
    pub client: Client,
    /// `status.selection.revision`, for `selection.set`.
    selection: Option<String>,
    /// The selected provider (for `/effort`).
    provider: Option<String>,
    /// The child's stderr lines, when piped.
    pub errs: Option<Receiver<String>>,
}

impl Commands {
    /// Commands over `client`.
    pub fn new(client: Client, errs: Option<Receiver<String>>) -> Self {
        Self {
            client,
            selection: None,
            provider: None,
            errs,
        }
    }

    /// Attaches session `id` (or a new one) and shows what it holds; the error code if not.
    pub fn attach(&mut self, app: &mut ChatApp, id: Option<&str>) -> Result<(), String> {
        let call = match id {
            Some(sid) => Call::SessionOpen(SessionOpenParams {
                session_id: sid.to_owned(),
            }),
            None => Call::SessionCreate(EmptyParams {}),
        };
        let r: SessionResult = self.client.call(call).map_err(|e| why(&e))?;
        app.info.session = r.session_id.clone();
        app.info.title = None;
        let sid = &r.session_id;
        // A new session is saved by its first prompt; the way back is told on leaving, and
        // only for a session that was.
        let hint = if id.is_some() {
            "(/help lists commands)"
        } else {
            "(new: saved with its first prompt; /help lists commands)"
        };
        app.print([Line::from(vec![
            Span::raw(format!("session {sid} ")),
            Span::styled(hint, dim()),
        ])]);
        if id.is_some() {
            self.transcript(app, &r.session_id, r.revision);
        }
        self.refresh(app);
        Ok(())
    }

    /// Prints the saved conversation of `sid` from `history.page`, every page.
    fn transcript(&mut self, app: &mut ChatApp, sid: &str, revision: String) {
        let mut cursor = None;
        let mut entries = Vec::new();
        let mut whole = false;
        for _ in 0..HISTORY_PAGES {
            let params = HistoryPageParams {
                session_id: sid.to_owned(),
                revision: revision.clone(),
                cursor,
            };
            let page: HistoryPageResult = match self.client.call(Call::HistoryPage(params)) {
                Ok(p) => p,
                Err(e) => {
                    app.error(&format!("[history: {}]", why(&e)));
                    break;
                }
            };
            entries.extend(page.entries);
            match page.next_cursor {
                Some(c) if !page.complete => cursor = Some(c),
                _ => {
                    whole = true;
                    break;
                }
            }
        }
        // Up walks the session's earlier prompts too.
        let prompts = entries
            .iter()
            .filter(|e| e.kind == EntryKind::User && e.part == 0);
        for e in prompts {
            app.editor.remember(&e.text);
        }
        if !entries.is_empty() {
            app.print(transcript::lines(&entries));
            if !whole {
                app.error("[the saved conversation goes on past what was read]");
            }
            app.say("");
        }
    }

    /// The status line's model, effort and title, from `status` and `session.list`.
    pub fn refresh(&mut self, app: &mut ChatApp) {
        if let Ok(s) = self.client.call::<Status>(Call::Status(EmptyParams {})) {
            app.info.model = s.model.clone();
            if let Some(sel) = s.selection {
                let effort = sel.effective_effort.unwrap_or(sel.requested_effort);
                app.info.effort = Some(word(&effort));
                app.info.model = sel.model.or(s.model);
                self.provider = sel.provider;
                self.selection = Some(sel.revision);
            }
        }
        if let Ok(list) = self.sessions() {
            let title = list.into_iter().find(|s| s.session_id == app.info.session);
            app.info.title = title.and_then(|s| s.title).map(|t| printable(&t));
        }
    }

    /// Every page of `session.list`.
    fn sessions(&mut self) -> Result<Vec<SessionEntry>, String> {
        let mut params = SnapshotPageParams::default();
        let mut all = Vec::new();
        for _ in 0..PAGES {
            let r: SessionListResult = self
                .client
                .call(Call::SessionList(params))
                .map_err(|e| why(&e))?;
            all.extend(r.sessions);
            match next_page(r.revision, r.next_cursor, r.complete) {
                Some(next) => params = next,
                None => break,
            }
        }
        Ok(all)
    }

    /// Every page of `model.catalog` and its revision.
    fn catalog(&mut self) -> Result<(String, Vec<Choice>), String> {
        let mut params = SnapshotPageParams::default();
        let mut all = Vec::new();
        for _ in 0..PAGES {
            let r: ModelCatalogResult = self
                .client
                .call(Call::ModelCatalog(params))
                .map_err(|e| why(&e))?;
            all.extend(r.choices);
            match next_page(r.revision.clone(), r.next_cursor, r.complete) {
                Some(next) => params = next,
                None => return Ok((r.revision, all)),
            }
        }
        Err("catalog_limit".to_owned())
    }

    /// Runs slash command `cmd` with `arg`.
    pub fn run(&mut self, app: &mut ChatApp, cmd: &str, arg: &str) {
        match cmd {
            "sessions" => self.list(app),
            "open" if arg.is_empty() => app.error("usage: /open ID"),
            "open" => {
                if let Err(code) = self.attach(app, Some(arg)) {
                    app.error(&format!("[open refused: {code}]"));
                }
            }
            "new" => {
                if let Err(code) = self.attach(app, None) {
                    app.error(&format!("[new session refused: {code}]"));
                }
            }
            "model" => self.model(app, arg),
            "effort" => self.effort(app, arg),
            _ => app.error(&format!("unknown command /{cmd}; /help lists them")),
        }
    }

    fn list(&mut self, app: &mut ChatApp) {
        match self.sessions() {
            Ok(list) if list.is_empty() => app.say("no saved sessions in this folder"),
            Ok(list) => {
                for s in list {
                    let mark = if s.session_id == app.info.session {
                        "  (this chat)"
                    } else {
                        ""
                    };
                    app.say(&format!(
                        "{}  {}  {}  {}{mark}",
                        s.session_id,
                        s.title.as_deref().unwrap_or("(untitled)"),
                        s.updated_at.as_deref().unwrap_or("(empty)"),
                        word(&s.eligibility),
                    ));
                }
            }
            Err(code) => app.error(&format!("[sessions: {code}]")),
        }
    }

    /// `/model`: lists the catalog; `/model ID` (model, provider/model or selection ID)
    /// switches to it.
    fn model(&mut self, app: &mut ChatApp, arg: &str) {
        let (revision, choices) = match self.catalog() {
            Ok(c) => c,
            Err(code) => return app.error(&format!("[catalog: {code}]")),
        };
        if arg.is_empty() {
            if choices.is_empty() {
                app.say(&no_models(app.info.model.as_deref()));
            }
            for c in &choices {
                let current = app.info.model.as_deref() == Some(c.model.as_str());
                let mark = if current { "  (current)" } else { "" };
                let name = c
                    .model_name
                    .as_deref()
                    .map_or_else(String::new, |n| format!("  {n}"));
                let efforts: Vec<String> = c.permitted_efforts.iter().map(word).collect();
                app.say(&format!(
                    "{}/{}{name}  {}  efforts: {}{mark}",
                    c.provider,
                    c.model,
                    word(&c.availability),
                    efforts.join(" ")
                ));
            }
            return;
        }
        let found = choices.iter().find(|c| {
            arg == c.model || arg == c.selection_id || arg == format!("{}/{}", c.provider, c.model)
        });
        let Some(choice) = found else {
            return app.error(&format!("no catalog model {arg}; /model lists them"));
        };
        let (provider, model) = (choice.provider.clone(), choice.model.clone());
        self.select(app, revision, provider, model, EffortRequest::Keep);
    }

    /// `/effort`: lists the permitted levels; `/effort LEVEL` switches to it.
    fn effort(&mut self, app: &mut ChatApp, arg: &str) {
        let (revision, choices) = match self.catalog() {
            Ok(c) => c,
            Err(code) => return app.error(&format!("[catalog: {code}]")),
        };
        let current = choices.into_iter().find(|c| {
            Some(c.model.as_str()) == app.info.model.as_deref()
                && Some(c.provider.as_str()) == self.provider.as_deref()
        });
        let Some(choice) = current else {
            return app.error("the current model is not in the catalog");
        };
        let levels: Vec<String> = choice.permitted_efforts.iter().map(word).collect();
        if arg.is_empty() {
            let shown = if levels.is_empty() {
                "none".to_owned()
            } else {
                levels.join(" ")
            };
            return app.say(&format!("efforts of {}: {shown}", choice.model));
        }
        let request = if arg == "default" {
            EffortRequest::Default
        } else {
            match serde_json::from_value::<EffortLevel>(serde_json::json!(arg)) {
                Ok(value) => EffortRequest::Set { value },
                Err(_) => return app.error(&format!("no effort {arg}; /effort lists them")),
            }
        };
        self.select(app, revision, choice.provider, choice.model, request);
    }

    fn select(
        &mut self,
        app: &mut ChatApp,
        catalog: String,
        provider: String,
        model: String,
        effort: EffortRequest,
    ) {
        let Some(selection) = self.selection.clone() else {
            return app.error("no selection to change yet");
        };
        let params = SelectionSetParams {
            session_id: app.info.session.clone(),
            selection_revision: selection,
            catalog_revision: catalog,
            provider,
            model,
            effort: Some(effort),
        };
        match self
            .client
            .call::<SelectionSetResult>(Call::SelectionSet(params))
        {
            Ok(r) => {
                self.refresh(app);
                let model = r.selection.model.unwrap_or_default();
                let effort = r
                    .selection
                    .effective_effort
                    .unwrap_or(r.selection.requested_effort);
                app.say(&format!("now {model}, effort {}", word(&effort)));
            }
            Err(e) => app.error(&format!("[selection refused: {}]", why(&e))),
        }
    }
}

/// What `/model` says when the catalog lists nothing: why, and the settings that fill it.
fn no_models(current: Option<&str>) -> String {
    let env = crate::startup::LaunchEnv::from_process();
    let global = std::env::current_dir()
        .ok()
        .and_then(|cwd| crate::startup::storage_root(&env, &cwd))
        .map_or_else(
            || "settings.json in MC_HOME".to_owned(),
            |root| root.join("settings.json").display().to_string(),
        );
    let now = current.map_or_else(String::new, |m| {
        format!("\nthe current model, {m}, works without it.")
    });
    format!(
        "no models are enabled: /model lists only the models named in providers.catalog.enabled.\n\
         add them in {global} (every folder) or .magi/settings.json (this folder), e.g.\n  \
         {{\"providers\": {{\"catalog\": {{\"enabled\": [\"scripted/echo\"]}}}}}}\n\
         scripted/echo runs offline with no key (it answers with the prompt); the other providers\n\
         need a key or a sign-in first (`magi-code doctor` checks them).\n\
         then restart the chat (settings are read when it starts).{now}"
    )
}

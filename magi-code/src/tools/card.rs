//! `tool.cards` display cards: what a call is (from its name and input), then how it ended
//! (from [`ToolDetails`]); sanitized, redacted and bounded, never a raw result body.

use super::outcome::{ToolDetails, ToolOutcome};
use crate::util::redact::sanitize_text;
use crate::util::text::cut;
use crate::wire::tool_cards::Card as Shown;
pub use crate::wire::tool_cards::CardStatus;
use protocol_core::limits::{CARD_BYTES, CARD_TITLE_BYTES};
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Command {
        command: String,
    },
    FileRead {
        path: String,
    },
    FileEdit {
        path: String,
    },
    Search {
        pattern: String,
        path: Option<String>,
    },
    Mcp {
        server: String,
        tool: String,
    },
    Client {
        name: String,
    },
    Subagent {
        agent: String,
    },
    Generic,
}

/// What a call is, fixed when it starts; [`Card::render`] renders it in a given state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    kind: Kind,
    title: String,
}

/// One display line: sanitized and redacted, white space as spaces, ends trimmed.
fn clean(s: &str) -> String {
    sanitize_text(s)
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned()
}

/// `path` as shown: relative to `cwd` when inside it (lexically), else only the file name.
fn shown_path(path: &str, cwd: &Path) -> String {
    let mut abs = PathBuf::new();
    for c in cwd.join(path).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                abs.pop();
            }
            other => abs.push(other),
        }
    }
    let shown = match abs.strip_prefix(cwd) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => abs
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    clean(&shown)
}

fn field<'a>(input: &'a Value, k: &str) -> Option<&'a str> {
    input.get(k).and_then(Value::as_str)
}

impl Card {
    /// The card of a call of tool `name` (as offered to the model) with `input`, paths shown
    /// against `cwd`. Inputs without the fields a kind needs make a `generic` card.
    #[must_use]
    pub fn new(name: &str, input: &Value, cwd: &Path) -> Self {
        let path = |k| field(input, k).map(|p| shown_path(p, cwd));
        let kind = match name {
            "shell" => field(input, "command").map(|c| Kind::Command { command: clean(c) }),
            "read_file" => path("path").map(|path| Kind::FileRead { path }),
            "write_file" | "edit_file" => path("path").map(|path| Kind::FileEdit { path }),
            "apply_patch" => {
                crate::tools::builtin::patch_files(input)
                    .first()
                    .map(|p| Kind::FileEdit {
                        path: shown_path(p, cwd),
                    })
            }
            "grep" | "glob" => field(input, "pattern").map(|p| Kind::Search {
                pattern: clean(p),
                path: path("path"),
            }),
            "task" => Some(Kind::Subagent {
                agent: clean(field(input, "agent").unwrap_or("task")),
            }),
            _ => name.strip_prefix("mcp__").and_then(|rest| {
                let (server, tool) = rest.split_once("__")?;
                Some(Kind::Mcp {
                    server: clean(server),
                    tool: clean(tool),
                })
            }),
        };
        let kind = kind.unwrap_or(Kind::Generic);
        let title = match &kind {
            Kind::Command { command } => format!("$ {command}"),
            Kind::FileRead { path } => format!("Read {path}"),
            Kind::FileEdit { path } if name == "write_file" => format!("Write {path}"),
            Kind::FileEdit { path } if name == "apply_patch" => {
                match crate::tools::builtin::patch_files(input).len() {
                    1 => format!("Patch {path}"),
                    n => format!("{n} files"),
                }
            }
            Kind::FileEdit { path } => format!("Edit {path}"),
            Kind::Search { pattern, path } => {
                let verb = if name == "glob" { "Find" } else { "Search" };
                format!("{verb} {pattern} in {}", path.as_deref().unwrap_or("."))
            }
            Kind::Mcp { server, tool } => format!("{server}: {tool}"),
            Kind::Subagent { agent } => format!("Task {agent}"),
            Kind::Client { .. } | Kind::Generic => clean(name),
        };
        Self { kind, title }
    }

    /// The card of a call of client tool `name` (`client.tools`).
    #[must_use]
    pub fn client(name: &str) -> Self {
        let name = clean(name);
        Self {
            title: name.clone(),
            kind: Kind::Client { name },
        }
    }

    /// The card as sent and stored: `{kind, title, status, ...kind fields}`, the title at most
    /// [`CARD_TITLE_BYTES`] and the whole at most [`CARD_BYTES`] serialized (the longest
    /// string field is cut until it fits). Counts come from `outcome` once it ran.
    #[must_use]
    pub fn render(&self, status: CardStatus, outcome: Option<&ToolOutcome>) -> Shown {
        let details = outcome.map_or(ToolDetails::None, |o| o.details);
        let title = cut(&self.title, CARD_TITLE_BYTES).to_owned();
        let mut card = match &self.kind {
            Kind::Command { command } => {
                let (exit_code, duration_ms) = match details {
                    ToolDetails::Command {
                        exit_code,
                        duration_ms,
                    } => (exit_code.map(i64::from), Some(duration_ms)),
                    _ => (None, None),
                };
                Shown::Command {
                    title,
                    status,
                    command: command.clone(),
                    exit_code,
                    duration_ms,
                }
            }
            Kind::FileRead { path } => Shown::FileRead {
                title,
                status,
                path: path.clone(),
                lines: match details {
                    ToolDetails::FileRead { lines } => Some(lines),
                    _ => None,
                },
            },
            Kind::FileEdit { path } => {
                let (added, removed) = match details {
                    ToolDetails::FileEdit { added, removed } => (added, removed),
                    _ => (0, 0),
                };
                Shown::FileEdit {
                    title,
                    status,
                    path: path.clone(),
                    added,
                    removed,
                }
            }
            Kind::Search { pattern, path } => Shown::Search {
                title,
                status,
                pattern: pattern.clone(),
                path: path.clone(),
                matches: match details {
                    ToolDetails::Search { matches } => Some(matches),
                    _ => None,
                },
            },
            Kind::Mcp { server, tool } => Shown::Mcp {
                title,
                status,
                server: server.clone(),
                tool: tool.clone(),
            },
            Kind::Client { name } => Shown::Client {
                title,
                status,
                name: name.clone(),
            },
            Kind::Subagent { agent } => Shown::Subagent {
                title,
                status,
                agent: agent.clone(),
            },
            Kind::Generic => Shown::Generic { title, status },
        };
        shrink(&mut card);
        card
    }
}

/// The card's string members other than `kind` and `status`, in the key order of its JSON
/// object (the order the cut used to pick among equally long members: the last wins).
fn strings(card: &mut Shown) -> Vec<&mut String> {
    match card {
        Shown::Command { title, command, .. } => vec![command, title],
        Shown::FileRead { title, path, .. } | Shown::FileEdit { title, path, .. } => {
            vec![path, title]
        }
        Shown::Search {
            title,
            pattern,
            path,
            ..
        } => path.iter_mut().chain([pattern, title]).collect(),
        Shown::Mcp {
            title,
            server,
            tool,
            ..
        } => vec![server, title, tool],
        Shown::Client { title, name, .. } => vec![name, title],
        Shown::Subagent { title, agent, .. } => vec![agent, title],
        Shown::Generic { title, .. } => vec![title],
    }
}

/// Cuts the longest string member until the card serializes to at most [`CARD_BYTES`]: each
/// raw byte cut removes at least one serialized byte, so the loop ends.
fn shrink(card: &mut Shown) {
    loop {
        let len = serde_json::to_string(&*card).map_or(0, |s| s.len());
        if len <= CARD_BYTES {
            return;
        }
        let longest = strings(card)
            .into_iter()
            .filter(|s| !s.is_empty())
            .max_by_key(|s| s.len());
        let Some(s) = longest else {
            return;
        };
        let keep = s.len().saturating_sub(len - CARD_BYTES);
        *s = cut(s, keep).to_owned();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    impl Card {
        /// The card as stored (`Body::ToolCard`): keys sorted, as the client reads it.
        fn value(&self, status: CardStatus, outcome: Option<&ToolOutcome>) -> Value {
            crate::wire::body(&self.render(status, outcome))
        }
    }

    fn ok(details: ToolDetails) -> ToolOutcome {
        ToolOutcome::success("x".into(), "x".into(), false).with(details)
    }

    fn len(v: &Value) -> usize {
        serde_json::to_string(v).unwrap().len()
    }

    #[test]
    fn kinds_from_names_and_inputs() {
        let cwd = Path::new("/w/p");
        let c = Card::new("shell", &json!({"command": "cargo\ntest"}), cwd);
        let v = c.value(
            CardStatus::Completed,
            Some(&ok(ToolDetails::Command {
                exit_code: Some(3),
                duration_ms: 12,
            })),
        );
        assert_eq!(
            v,
            json!({"kind": "command", "title": "$ cargo test", "status": "completed", "command": "cargo test", "exit_code": 3, "duration_ms": 12})
        );
        let v = c.value(CardStatus::Running, None);
        assert_eq!(
            (&v["exit_code"], &v["duration_ms"]),
            (&Value::Null, &Value::Null)
        );
        let v = Card::new("read_file", &json!({"path": "/w/p/src/../a.rs"}), cwd).value(
            CardStatus::Completed,
            Some(&ok(ToolDetails::FileRead { lines: 4 })),
        );
        assert_eq!(v["path"], "a.rs");
        assert_eq!(v["lines"], 4);
        let v = Card::new("edit_file", &json!({"path": "/etc/x/passwd"}), cwd)
            .value(CardStatus::Failed, None);
        assert_eq!(
            v,
            json!({"kind": "file_edit", "title": "Edit passwd", "status": "failed", "path": "passwd", "added": 0, "removed": 0})
        );
        let v = Card::new("grep", &json!({"pattern": "fn"}), cwd).value(CardStatus::Running, None);
        assert_eq!(
            v,
            json!({"kind": "search", "title": "Search fn in .", "status": "running", "pattern": "fn", "path": null, "matches": null})
        );
        let v = Card::new("mcp__git__log", &json!({}), cwd).value(CardStatus::Running, None);
        assert_eq!(
            (&v["kind"], &v["server"], &v["tool"]),
            (&json!("mcp"), &json!("git"), &json!("log"))
        );
        let v = Card::new("mcp__bad", &json!({}), cwd).value(CardStatus::Running, None);
        assert_eq!(
            v,
            json!({"kind": "generic", "title": "mcp__bad", "status": "running"})
        );
        let v = Card::new("read_file", &json!(7), cwd).value(CardStatus::Failed, None);
        assert_eq!(v["kind"], "generic");
        let v = Card::client("lookup").value(CardStatus::Completed, None);
        assert_eq!(
            v,
            json!({"kind": "client", "title": "lookup", "status": "completed", "name": "lookup"})
        );
        let v =
            Card::new("task", &json!({"agent": "review"}), cwd).value(CardStatus::Running, None);
        assert_eq!(
            (&v["kind"], &v["agent"]),
            (&json!("subagent"), &json!("review"))
        );
    }

    #[test]
    fn secrets_are_redacted() {
        let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789";
        let v = Card::new(
            "shell",
            &json!({"command": format!("curl -H {key}")}),
            Path::new("/"),
        )
        .value(CardStatus::Running, None);
        assert!(!v.to_string().contains(key));
    }

    #[test]
    fn title_is_cut_at_256_bytes() {
        let cwd = Path::new("/w");
        // "$ " + 254 → 256 bytes kept whole; one more is cut.
        let v = Card::new("shell", &json!({"command": "a".repeat(254)}), cwd)
            .value(CardStatus::Running, None);
        assert_eq!(v["title"].as_str().unwrap().len(), 256);
        let v = Card::new("shell", &json!({"command": "a".repeat(255)}), cwd)
            .value(CardStatus::Running, None);
        assert_eq!(v["title"].as_str().unwrap().len(), 256);
        assert_eq!(v["command"].as_str().unwrap().len(), 255);
        let v = Card::new("shell", &json!({"command": "é".repeat(200)}), cwd)
            .value(CardStatus::Running, None);
        assert_eq!(v["title"].as_str().unwrap().len(), 256);
    }

    #[test]
    fn card_is_shrunk_to_4096_bytes() {
        let cwd = Path::new("/w");
        let base =
            len(&Card::new("shell", &json!({"command": ""}), cwd).value(CardStatus::Running, None));
        // The title is "$ " and the command, cut at 256 bytes.
        let fits = CARD_BYTES - base - 254;
        let v = Card::new("shell", &json!({"command": "a".repeat(fits)}), cwd)
            .value(CardStatus::Running, None);
        assert_eq!(len(&v), CARD_BYTES);
        assert_eq!(v["command"].as_str().unwrap().len(), fits);
        let v = Card::new("shell", &json!({"command": "a".repeat(fits + 1)}), cwd)
            .value(CardStatus::Running, None);
        assert_eq!(len(&v), CARD_BYTES);
        assert_eq!(v["command"].as_str().unwrap().len(), fits);
        let v = Card::new("shell", &json!({"command": "\"".repeat(5000)}), cwd)
            .value(CardStatus::Running, None);
        assert!(len(&v) <= CARD_BYTES);
    }

    #[test]
    fn equally_long_members_cut_the_last_in_key_order() {
        // `server`, `title`, `tool` in key order: the tie goes to `tool`, as when the card
        // was cut as a JSON object.
        let long = "s".repeat(2100);
        let v = Card::new(&format!("mcp__{long}__{long}"), &json!({}), Path::new("/"))
            .value(CardStatus::Running, None);
        assert_eq!(len(&v), CARD_BYTES);
        assert_eq!(v["server"].as_str().unwrap().len(), 2100);
        assert!(v["tool"].as_str().unwrap().len() < 2100);
    }
}

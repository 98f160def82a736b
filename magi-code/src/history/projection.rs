//! The bounded display projection that `history.page` pages through, built record by record.

use super::record::{ActivityState, Body, HistoryError, Record};
use crate::util::redact::sanitize_text;
use serde_json::json;
use std::collections::{HashMap, HashSet};

/// Largest text part, raw and escaped.
pub const CHUNK_BYTES: usize = protocol_core::limits::HISTORY_CHUNK_BYTES;
/// Largest serialized projection.
pub const SNAPSHOT_BYTES: usize = protocol_core::limits::HISTORY_SNAPSHOT_BYTES;
/// Most parts in a projection.
pub const SNAPSHOT_PARTS: usize = protocol_core::limits::HISTORY_SNAPSHOT_PARTS;

#[derive(Debug)]
struct Logical {
    kind: &'static str,
    text: String,
    partial: bool,
    /// For assistant entries: the reconciled copy arrived; later chunks are ignored.
    reconciled: bool,
}

impl Logical {
    fn new(kind: &'static str, text: String, partial: bool) -> Self {
        Self {
            kind,
            text,
            partial,
            reconciled: false,
        }
    }
}

/// Builds the projection record by record, holding at most about twice the snapshot budget.
#[derive(Debug, Default)]
pub struct Projector {
    out: Vec<Logical>,
    messages: HashMap<String, usize>,
    summaries: HashMap<(String, String), usize>,
    activities: HashMap<String, usize>,
    runs: Vec<String>,
    finished: HashSet<String>,
    held: usize,
}

impl Projector {
    fn set_text(&mut self, i: usize, text: String) -> Result<(), HistoryError> {
        self.held = self.held - self.out[i].text.len() + text.len();
        self.out[i].text = text;
        self.check()
    }

    fn add(&mut self, l: Logical) -> Result<usize, HistoryError> {
        self.held += l.text.len();
        self.out.push(l);
        self.check()?;
        Ok(self.out.len() - 1)
    }

    fn check(&self) -> Result<(), HistoryError> {
        if self.out.len() > SNAPSHOT_PARTS || self.held > 2 * SNAPSHOT_BYTES {
            Err(HistoryError::TooLarge)
        } else {
            Ok(())
        }
    }

    /// Takes the next record.
    pub fn push(&mut self, r: &Record) -> Result<(), HistoryError> {
        match &r.body {
            Body::UserInput { run_id, text, .. } => {
                self.runs.push(run_id.clone());
                self.add(Logical::new("user", text.clone(), false))?;
            }
            Body::RunFinished { run_id, .. } => {
                self.finished.insert(run_id.clone());
            }
            Body::AssistantChunk {
                message_id, text, ..
            } => match self.messages.get(message_id.as_str()) {
                Some(&i) if self.out[i].reconciled => {}
                Some(&i) => {
                    let mut t = std::mem::take(&mut self.out[i].text);
                    self.held -= t.len();
                    t.push_str(text);
                    self.set_text(i, t)?;
                }
                None => {
                    let i = self.add(Logical::new("assistant", text.clone(), true))?;
                    self.messages.insert(message_id.clone(), i);
                }
            },
            Body::AssistantMessage {
                message_id,
                text,
                partial,
                ..
            } => match self.messages.get(message_id.as_str()) {
                Some(&i) => {
                    if let Some(t) = text {
                        self.set_text(i, t.clone())?;
                    }
                    // Legacy output without text keeps its stored chunks.
                    self.out[i].partial = *partial;
                    self.out[i].reconciled = true;
                }
                None => {
                    let mut l =
                        Logical::new("assistant", text.clone().unwrap_or_default(), *partial);
                    l.reconciled = true;
                    let i = self.add(l)?;
                    self.messages.insert(message_id.clone(), i);
                }
            },
            Body::ReasoningSummary {
                run_id,
                text,
                item_id,
                provider_summary,
            } => {
                if *provider_summary != Some(true) {
                    return Ok(());
                }
                let l = Logical::new("reasoning_summary", text.clone(), false);
                match item_id {
                    Some(item) => {
                        let key = (run_id.clone(), item.clone());
                        match self.summaries.get(&key) {
                            Some(&i) => self.set_text(i, l.text)?,
                            None => {
                                let i = self.add(l)?;
                                self.summaries.insert(key, i);
                            }
                        }
                    }
                    None => {
                        self.add(l)?;
                    }
                }
            }
            Body::Activity {
                activity_id,
                state,
                name,
                summary,
                ..
            } => {
                let mut line = format!("{name}: {}", state.as_str());
                if let Some(sum) = summary.as_deref().filter(|x| !x.is_empty()) {
                    line.push_str(" — ");
                    line.push_str(sum);
                }
                let partial = *state == ActivityState::Started;
                match self.activities.get(activity_id.as_str()) {
                    Some(&i) => {
                        self.set_text(i, line)?;
                        self.out[i].partial = partial;
                    }
                    None => {
                        let i = self.add(Logical::new("activity", line, partial))?;
                        self.activities.insert(activity_id.clone(), i);
                    }
                }
            }
            Body::Compaction { summary, .. } => {
                let t = summary.as_deref().unwrap_or("history compacted").to_owned();
                self.add(Logical::new("compaction", t, false))?;
            }
            Body::SessionMeta {}
            | Body::SessionPreferences { .. }
            | Body::Title { .. }
            | Body::ToolCall { .. }
            | Body::ToolResult { .. }
            | Body::ProviderItem { .. }
            | Body::Usage { .. } => {}
        }
        Ok(())
    }

    /// Ends the projection; a torn tail or a turn without `run_finished` makes it partial.
    pub fn finish(mut self, torn_tail: bool) -> Result<Projection, HistoryError> {
        let interrupted = torn_tail || self.runs.iter().any(|r| !self.finished.contains(r));
        if interrupted {
            self.add(Logical::new(
                "diagnostic",
                "A turn was interrupted before it finished durably; its reply may be incomplete."
                    .into(),
                true,
            ))?;
        }
        let mut entries = Vec::new();
        let mut bytes = 0usize;
        for (n, l) in self.out.iter().enumerate() {
            let text = sanitize_text(&l.text);
            let parts = chunk(&text);
            let last = parts.len() - 1;
            for (i, part) in parts.into_iter().enumerate() {
                let e = json!({
                    "message_id": format!("m{n}"),
                    "kind": l.kind,
                    "text": part,
                    "partial": l.partial,
                    "part": i,
                    "last_part": i == last,
                });
                let ser = e.to_string();
                bytes += ser.len() + 1;
                entries.push(ser);
                if entries.len() > SNAPSHOT_PARTS || bytes > SNAPSHOT_BYTES {
                    return Err(HistoryError::TooLarge);
                }
            }
        }
        Ok(Projection {
            entries,
            complete: !interrupted,
        })
    }
}

/// An immutable projection: serialized entries and completeness.
#[derive(Debug, Clone, Default)]
pub struct Projection {
    /// Serialized entry objects, in order.
    pub entries: Vec<String>,
    /// Whether the projection is complete (no interrupted turn).
    pub complete: bool,
}

/// Splits text into parts whose escaped JSON length (and so raw length) is at most
/// [`CHUNK_BYTES`], never inside a UTF-8 sequence.
#[must_use]
pub fn chunk(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = 0usize;
    for (i, c) in text.char_indices() {
        let w = match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if escaped + w > CHUNK_BYTES {
            parts.push(&text[start..i]);
            start = i;
            escaped = 0;
        }
        escaped += w;
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_utf8_and_escapes() {
        let t = "é".repeat(10_000);
        let parts = chunk(&t);
        assert!(parts.iter().all(|p| p.len() <= CHUNK_BYTES));
        assert_eq!(parts.concat(), t);
        let q = "\"".repeat(10_000);
        let parts = chunk(&q);
        assert_eq!(parts.len(), 2);
        assert!(parts
            .iter()
            .all(|p| serde_json::to_string(p).unwrap().len() <= CHUNK_BYTES + 2));
        let exact = "a".repeat(CHUNK_BYTES);
        assert_eq!(chunk(&exact).len(), 1);
        assert_eq!(chunk(&format!("{exact}a")).len(), 2);
    }
}

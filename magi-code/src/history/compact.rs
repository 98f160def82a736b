//! What a compaction leaves of the conversation (`runner.md` 7): the pieces a replay keeps
//! (summary, files written or edited, user inputs, the compacted turn) and the items built
//! from them for a given context window, so a live loop and a reopened child replay alike.

use super::record::{Body, Record};
use super::replay::Item;
use std::path::Path;

/// The tools whose calls name a file the session wrote or edited (their `path` input).
pub const FILE_TOOLS: [&str; 2] = ["write_file", "edit_file"];
/// The fixed assistant note after the compacted context, so the conversation alternates.
pub const CONTEXT_ACK: &str = "Understood. I will continue from this summary.";
/// Estimated request bytes per item besides its text (roles, IDs, framing).
const ITEM_OVERHEAD: u64 = 16;

/// The files a session wrote or edited, from its records: the paths of successful
/// `write_file`/`edit_file` calls, first write first, no repeats.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// The paths.
    pub files: Vec<String>,
    /// Such calls still waiting for their result.
    pending: Vec<(String, String)>,
}

impl Written {
    /// Starts from `files` already known to be written.
    #[must_use]
    pub fn new(files: Vec<String>) -> Self {
        Self {
            files,
            pending: Vec::new(),
        }
    }

    /// Takes the next record's body: a file tool's call, or the result that ends one.
    pub fn note(&mut self, body: &Body) {
        match body {
            Body::ToolCall {
                call_id,
                name,
                input,
                ..
            } if FILE_TOOLS.contains(&name.as_str()) => {
                if let Some(p) = input.get("path").and_then(serde_json::Value::as_str) {
                    self.pending.push((call_id.clone(), p.to_owned()));
                }
            }
            Body::ToolResult {
                call_id, is_error, ..
            } => {
                if let Some(k) = self.pending.iter().position(|(c, _)| c == call_id) {
                    let (_, path) = self.pending.remove(k);
                    if !is_error && !self.files.contains(&path) {
                        self.files.push(path);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The latest compaction point seen in the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// The summary.
    pub summary: String,
    /// Records before this index are replaced by the summary.
    pub through: u64,
    /// The index of the `compaction` record itself.
    pub at_record: u64,
}

/// What a replay remembers for compaction, record by record.
#[derive(Debug, Clone, Default)]
pub struct Marks {
    /// Records seen (the next record's index).
    pub records: u64,
    /// Every user input: its record index and its item index (the text is that item's: the
    /// replay only ever inserts into its open turn, after that turn's input).
    pub inputs: Vec<(u64, usize)>,
    /// The files written or edited.
    pub written: Written,
    /// The latest compaction and the item index where its record came.
    pub last: Option<(Point, usize)>,
}

impl Marks {
    /// Takes the next record; `items` is the replay's item count before the record's item.
    pub fn push(&mut self, r: &Record, items: usize) {
        let at = self.records;
        self.records += 1;
        match &r.body {
            Body::Compaction {
                summary: Some(summary),
                through,
                ..
            } => {
                let point = Point {
                    summary: summary.clone(),
                    // A record without `through` (legacy) replaces everything before it.
                    through: through.unwrap_or(at).min(at),
                    at_record: at,
                };
                self.last = Some((point, items));
            }
            body => self.written.note(body),
        }
    }

    /// Notes a user input's item (called after the replay closed the previous turn).
    pub fn input(&mut self, items: usize) {
        self.inputs.push((self.records - 1, items));
    }
}

/// An owned copy of what a turn starts from.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The latest summary, if the session was compacted.
    pub summary: Option<String>,
    /// Files written or edited (as the calls named them).
    pub files: Vec<String>,
    /// Every user input, in order.
    pub inputs: Vec<String>,
    /// How many of them came before the compacted turn (the summary's recent inputs).
    pub inputs_before: usize,
    /// The compacted turn's items from its input up to the `compaction` record.
    pub mid: Vec<Item>,
    /// The items after that (all items without a compaction).
    pub after: Vec<Item>,
    /// Records stored so far.
    pub records: u64,
    /// The `input_tokens` of the last `usage` record since the last compaction.
    pub last_input_tokens: Option<u64>,
    /// Stored bytes since that record.
    pub bytes_since_usage: u64,
}

/// The estimated request bytes of one item.
#[must_use]
pub fn item_bytes(item: &Item) -> u64 {
    let n = match item {
        Item::User { text } | Item::Assistant { text } => text.len(),
        Item::ToolCall {
            call_id,
            name,
            input,
        } => call_id.len() + name.len() + input.to_string().len(),
        Item::ToolResult {
            call_id, output, ..
        } => call_id.len() + output.len(),
        Item::ProviderItem { item, .. } => item.to_string().len(),
    };
    n as u64 + ITEM_OVERHEAD
}

/// The estimated request bytes of a list of items.
#[must_use]
pub fn items_bytes(items: &[Item]) -> u64 {
    items.iter().map(item_bytes).sum()
}

/// Whether an estimate of `tokens` passes 80% of a `window`-token context.
#[must_use]
pub const fn over_threshold(tokens: u64, window: u64) -> bool {
    tokens.saturating_mul(5) > window.saturating_mul(4)
}

/// A path as the model should read it: relative to `cwd` when it lies inside it.
fn relative(path: &str, cwd: &Path) -> String {
    Path::new(path)
        .strip_prefix(cwd)
        .map_or_else(|_| path.to_owned(), |p| p.to_string_lossy().into_owned())
}

/// The compacted context message: summary, files, and the chosen recent inputs.
fn context_text(summary: &str, files: &[String], recent: &[&str], cwd: &Path) -> String {
    let mut t = String::from(
        "The earlier part of this conversation was compacted into the summary below.\n\n\
         ## Summary\n",
    );
    t.push_str(summary);
    let mut seen: Vec<String> = Vec::new();
    for f in files {
        let r = relative(f, cwd);
        if !seen.contains(&r) {
            seen.push(r);
        }
    }
    if !seen.is_empty() {
        t.push_str("\n\n## Files written or edited in this session\n");
        for f in &seen {
            t.push_str("- ");
            t.push_str(f);
            t.push('\n');
        }
    }
    if !recent.is_empty() {
        t.push_str("\n\n## The most recent user inputs, oldest first, verbatim\n");
        for r in recent {
            t.push_str("\n<user_input>\n");
            t.push_str(r);
            t.push_str("\n</user_input>\n");
        }
    }
    t
}

/// Where the first step after the turn's input ends in `mid` (its calls and their results).
fn first_step_end(mid: &[Item]) -> Option<usize> {
    let start = usize::from(matches!(mid.first(), Some(Item::User { .. })));
    if start >= mid.len() {
        return None;
    }
    let mut k = start;
    while k < mid.len() && !matches!(mid[k], Item::ToolResult { .. }) {
        k += 1;
    }
    while k < mid.len() && matches!(mid[k], Item::ToolResult { .. }) {
        k += 1;
    }
    Some(k)
}

/// What a compacted replay is built from.
#[derive(Debug, Clone, Copy)]
pub struct Pieces<'a> {
    /// The summary.
    pub summary: &'a str,
    /// Files written or edited.
    pub files: &'a [String],
    /// The user inputs before the compacted turn, in order.
    pub inputs: &'a [String],
    /// The compacted turn's items, from its input.
    pub mid: &'a [Item],
    /// The items after the `compaction` record (never cut).
    pub after: &'a [Item],
}

/// What a compaction replays, built for a `window`-token context whose instructions and tool
/// definitions take `fixed` bytes (`runner.md` 7). Recent inputs are walked newest first while
/// they fit in 20% of the window; then, while the whole request passes 50% of it, the oldest
/// chosen input is left out, then the compacted turn's oldest step (its calls with their
/// results), then the context text and last the turn's input are cut from their end.
#[must_use]
pub fn build(pieces: &Pieces<'_>, window: u64, fixed: u64, cwd: &Path) -> Vec<Item> {
    let Pieces {
        summary,
        files,
        inputs,
        mid,
        after,
    } = *pieces;
    // 1 token per 4 bytes: 20% of the window is 0.8 bytes per token, 50% is 2.
    let recent_budget = window.saturating_mul(4) / 5;
    let budget = window.saturating_mul(2);
    let mut recent: Vec<&str> = Vec::new();
    let mut used = 0u64;
    for text in inputs.iter().rev() {
        used = used.saturating_add(text.len() as u64);
        if used > recent_budget {
            break;
        }
        recent.push(text);
    }
    recent.reverse();
    let mut mid = mid.to_vec();
    let after_bytes = items_bytes(after);
    loop {
        let ctx = context_text(summary, files, &recent, cwd);
        let total = fixed
            + ctx.len() as u64
            + items_bytes(&[Item::User {
                text: String::new(),
            }])
            + item_bytes(&Item::Assistant {
                text: CONTEXT_ACK.to_owned(),
            })
            + items_bytes(&mid)
            + after_bytes;
        if total <= budget {
            return assemble(ctx, mid, after);
        }
        if !recent.is_empty() {
            recent.remove(0);
            continue;
        }
        if let Some(k) = first_step_end(&mid) {
            let start = usize::from(matches!(mid.first(), Some(Item::User { .. })));
            mid.drain(start..k);
            continue;
        }
        // Only text is left to cut: the context first, then the turn's input.
        let mut excess = usize::try_from(total - budget).unwrap_or(usize::MAX);
        let keep = ctx.len().saturating_sub(excess);
        excess -= ctx.len() - keep;
        let ctx = crate::util::text::bounded(&ctx, keep);
        if let Some(Item::User { text }) = mid.first_mut() {
            let keep = text.len().saturating_sub(excess);
            *text = crate::util::text::bounded(text, keep);
        }
        return assemble(ctx, mid, after);
    }
}

fn assemble(ctx: String, mut mid: Vec<Item>, after: &[Item]) -> Vec<Item> {
    let mut items = vec![
        Item::User { text: ctx },
        Item::Assistant {
            text: CONTEXT_ACK.to_owned(),
        },
    ];
    items.append(&mut mid);
    items.extend_from_slice(after);
    items
}

#[cfg(test)]
mod tests;

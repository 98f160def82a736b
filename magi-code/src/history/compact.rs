//! What a compaction leaves of the conversation (`runner.md` 7): the pieces a replay keeps
//! (summary, files written or edited, user inputs, the compacted turn) and the items built
//! from them for a given context window, so a live loop and a reopened child replay alike.

use super::item::Item;
use super::record::{Body, Record};
use std::path::Path;

/// The tools whose calls name a file the session wrote or edited (their `path` input).
pub const FILE_TOOLS: [&str; 2] = ["write_file", "edit_file"];
/// The tool whose calls write the files its patch adds or updates.
pub const PATCH_TOOL: &str = "apply_patch";

/// The files an `apply_patch` input writes, by the patch's own markers: each added or updated
/// file (a moved one under its new path); deleted ones are not written.
fn patched(input: &serde_json::Value) -> Vec<String> {
    let Some(patch) = input.get("patch").and_then(serde_json::Value::as_str) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines().map(str::trim_end) {
        if let Some(p) = line
            .strip_prefix("*** Add File: ")
            .or_else(|| line.strip_prefix("*** Update File: "))
        {
            out.push(p.trim().to_owned());
        } else if let Some(p) = line.strip_prefix("*** Move to: ") {
            if let Some(last) = out.last_mut() {
                p.trim().clone_into(last);
            }
        }
    }
    out
}

/// The fixed assistant note after the compacted context, so the conversation alternates.
pub const CONTEXT_ACK: &str = "Understood. I will continue from this summary.";
/// Estimated request bytes per item besides its text (roles, IDs, framing).
const ITEM_OVERHEAD: u64 = 16;

/// The files a session wrote or edited, from its records: the paths of successful
/// `write_file`/`edit_file` calls and the files `apply_patch` calls added or updated, first
/// write first, no repeats.
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

    /// Whether a file tool's call still waits for its result.
    #[must_use]
    pub fn waiting(&self) -> bool {
        !self.pending.is_empty()
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
            Body::ToolCall {
                call_id,
                name,
                input,
                ..
            } if name == PATCH_TOOL => {
                for p in patched(input) {
                    self.pending.push((call_id.clone(), p));
                }
            }
            Body::ToolResult {
                call_id, is_error, ..
            } => {
                while let Some(k) = self.pending.iter().position(|(c, _)| c == call_id) {
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
    /// The current turn's input when it follows `after` (a turn starting on a compacted
    /// session); `None` when the current input is `mid`'s first item.
    pub current: Option<&'a str>,
}

/// What a compaction replays, built for a `window`-token context whose instructions and tool
/// definitions take `fixed` bytes (`runner.md` 7, `decisions.md` 45). Recent inputs are walked
/// newest first while they fit in 20% of the window; then, while the whole request passes 50%
/// of it, the oldest chosen input is left out, then the compacted turn's oldest step (its calls
/// with their results), then the list of files; then the summary is cut (keeping its start,
/// at least [`SUMMARY_FLOOR`] bytes), and last the turn's input (keeping its first and last
/// parts, at least [`INPUT_FLOOR`] bytes), each cut marked by a line. The summary and the
/// current input are never left out, so no user message goes out empty.
#[must_use]
pub fn build(pieces: &Pieces<'_>, window: u64, fixed: u64, cwd: &Path) -> Vec<Item> {
    let Pieces {
        summary,
        mut files,
        inputs,
        mid,
        after,
        current,
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
    let mut turn = Turn {
        mid: mid.to_vec(),
        current: current.map(str::to_owned),
    };
    let rest = fixed
        + item_bytes(&Item::Assistant {
            text: CONTEXT_ACK.to_owned(),
        })
        + items_bytes(after);
    let size = |ctx: &str, turn: &Turn| {
        rest + item_bytes(&Item::User {
            text: ctx.to_owned(),
        }) + turn.bytes()
    };
    loop {
        let ctx = context_text(summary, files, &recent, cwd);
        if size(&ctx, &turn) <= budget {
            return assemble(ctx, turn, after);
        }
        if !recent.is_empty() {
            recent.remove(0);
            continue;
        }
        if let Some(k) = first_step_end(&turn.mid) {
            let start = usize::from(matches!(turn.mid.first(), Some(Item::User { .. })));
            turn.mid.drain(start..k);
            continue;
        }
        if !files.is_empty() {
            files = &[];
            continue;
        }
        break;
    }
    // Only the summary and the turn's input are left: the summary first, down to its floor.
    let whole = size(&context_text(summary, &[], &[], cwd), &turn);
    let excess = usize::try_from(whole.saturating_sub(budget)).unwrap_or(usize::MAX);
    let keep = summary
        .len()
        .saturating_sub(excess)
        .max(SUMMARY_FLOOR.min(summary.len()));
    let ctx = context_text(&cut::keep_start(summary, keep), &[], &[], cwd);
    let over = size(&ctx, &turn).saturating_sub(budget);
    if over > 0 {
        if let Some(text) = turn.input_mut() {
            let excess = usize::try_from(over).unwrap_or(usize::MAX);
            let keep = text
                .len()
                .saturating_sub(excess)
                .max(INPUT_FLOOR.min(text.len()));
            *text = cut::keep_ends(text, keep);
        }
    }
    assemble(ctx, turn, after)
}

/// Bytes of the summary a cut keeps at least, so a small window still carries its start.
pub const SUMMARY_FLOOR: usize = 512;
/// Bytes of the turn's input a cut keeps at least (its first and last parts).
pub const INPUT_FLOOR: usize = 512;

/// The compacted turn: its items from its input, and the current input when it comes last.
struct Turn {
    mid: Vec<Item>,
    current: Option<String>,
}

impl Turn {
    fn bytes(&self) -> u64 {
        items_bytes(&self.mid)
            + self
                .current
                .as_ref()
                .map_or(0, |t| item_bytes(&Item::User { text: t.to_owned() }))
    }

    /// The input a cut may shorten: the current one, else the compacted turn's.
    fn input_mut(&mut self) -> Option<&mut String> {
        if let Some(t) = self.current.as_mut() {
            return Some(t);
        }
        match self.mid.first_mut() {
            Some(Item::User { text }) => Some(text),
            _ => None,
        }
    }
}

fn assemble(ctx: String, turn: Turn, after: &[Item]) -> Vec<Item> {
    let Turn { mut mid, current } = turn;
    let mut items = vec![
        Item::User { text: ctx },
        Item::Assistant {
            text: CONTEXT_ACK.to_owned(),
        },
    ];
    items.append(&mut mid);
    items.extend_from_slice(after);
    items.extend(current.map(|text| Item::User { text }));
    items
}

pub mod cut;

/// The line that says the summary request left out the oldest part of the conversation.
pub const TRIMMED_NOTE: &str = "[the oldest part of the conversation was left out]";

/// The conversation as text for the summary request within `budget` bytes: an entry longer
/// than an eighth of the budget is cut to its first and last parts, then the oldest entries
/// are left out while it still passes (the newest entry alone is cut to its end), so one long
/// reply does not push every earlier turn out (`decisions.md` 46). Text keeps every provider's
/// pairing rules out of the way: no tool calls without tools, no orphan results.
#[must_use]
pub fn transcript(items: &[Item], budget: usize) -> String {
    let entry_max = budget / 8;
    let entries: Vec<String> = items
        .iter()
        .filter_map(|it| match it {
            Item::User { text } => Some(format!("[user]\n{text}")),
            Item::Assistant { text } => Some(format!("[assistant]\n{text}")),
            Item::ToolCall { name, input, .. } => Some(format!("[tool call: {name}]\n{input}")),
            Item::ToolResult {
                output, is_error, ..
            } => Some(format!(
                "[tool result{}]\n{output}",
                if *is_error { ", failed" } else { "" }
            )),
            Item::ProviderItem { .. } => None,
        })
        .map(|e| cut::keep_ends(&e, entry_max))
        .collect();
    // Entries are joined by a blank line: two bytes between each.
    let mut total: usize = entries
        .iter()
        .map(|e| e.len() + 2)
        .sum::<usize>()
        .saturating_sub(2);
    let mut from = 0;
    let note = TRIMMED_NOTE.len() + 2;
    while total + if from > 0 { note } else { 0 } > budget && from + 1 < entries.len() {
        total -= entries[from].len() + 2;
        from += 1;
    }
    let mut t = String::new();
    if from > 0 {
        t.push_str(TRIMMED_NOTE);
        t.push_str("\n\n");
    }
    let room = budget.saturating_sub(t.len());
    let body = entries[from..].join("\n\n");
    if body.len() > room {
        let mut cut = body.len() - room;
        while !body.is_char_boundary(cut) {
            cut += 1;
        }
        if from == 0 {
            t.push_str(TRIMMED_NOTE);
            t.push_str("\n\n");
        }
        t.push_str(&body[cut..]);
    } else {
        t.push_str(&body);
    }
    t
}

#[cfg(test)]
mod tests;

//! The `exec` tool as the model sees it (`code-mode.md` 3, 8): its input schema, and its
//! description, a fixed text followed by the reachable tools as one-line TypeScript
//! declarations generated from their JSON input schemas (or, past 20 tools, their names).
//!
//! Schema → type: `string`; `number`/`integer` → `number`; `boolean`; `null`; arrays `T[]`
//! (tuples `[A, B]`); objects `{a: T, b?: U}` (required members first, in `required`'s order,
//! then the others by name), or `{[key: string]: T}` without `properties`; `enum` and `const`
//! as literals joined by ` | `; `anyOf`/`oneOf` as unions, `allOf` as `&`; a type list as a
//! union; local `$ref`s (`#/$defs/X`, `#/definitions/X`) resolved; anything else, and anything
//! nested deeper than [`MAX_DEPTH`], `unknown`. Descriptions, formats and numeric bounds are
//! left out: a declaration is one line.

use crate::history::ToolSpec;
use crate::util::text::cut;
use serde_json::{json, Map, Value};

/// The tool's name.
pub const EXEC: &str = "exec";
/// Most reachable tools listed as declarations; past it, names with one line each.
pub const MAX_DECLARED_TOOLS: usize = 20;
/// Longest declaration in the description: past it, trailing input members are replaced by
/// `...` (`f(input: {path: string, ...}): Promise<string>`).
pub const DECLARATION_BYTES: usize = 512;
/// Longest declaration `describe(name)` returns, cut the same way.
pub const DESCRIBE_BYTES: usize = 4_096;
/// Longest description line of a tool in the list (its first line, cut with `...`).
pub const TOOL_LINE_BYTES: usize = 200;
/// Schemas nested deeper than this render as `unknown` (and recursive `$ref`s end).
pub const MAX_DEPTH: usize = 8;

/// What the model reads before the tool list.
pub const FIXED_TEXT: &str = "\
Run a JavaScript (ES2023) program that calls this session's tools as async functions, and \
get back only what it prints and returns. Use it to chain dependent calls, run independent \
ones together, loop over results, and cut large outputs down before they reach you.
- The code is the body of an async function: `await` and `return` work at top level. A \
Markdown code fence around it is removed.
- `await tools.<name>(input)` calls a tool with an input object and resolves to its output \
text (a string; parse it yourself). A name that is not a JavaScript identifier is called as \
`tools[\"name\"](input)`. Each call is checked, approved and recorded like a direct call.
- A refused or failed call throws a `ToolError` with `code` and `message`; `code` is \
`denied`, `blocked`, `unknown_tool`, `invalid_input`, `failed`, `cancelled` or `limit`. \
Catch it to go on without that result.
- `await Promise.all([...])` runs calls together.
- `text(value)` and `console.log(...)` (also `console.info`, `console.warn`, \
`console.error`) add lines to your result: strings as they are, other values as JSON. The \
returned value, unless `undefined`, comes last as JSON. Only this output comes back to you; \
what the tools returned stays in the program.
- `store(key, value)` keeps a JSON value for the next `exec` calls of this session and \
`load(key)` reads it back (`undefined` if never stored): 1 MiB in all, never saved to disk.
- `ALL_TOOLS` is an array of `{name, description}` of the tools below, and `describe(name)` \
returns one tool's declaration (or `null`).
- There is no file system, network, process, timers or modules: the program reaches the \
outside world only through tools. Its time, memory and tool calls are bounded; a call past \
the bound throws `ToolError` `limit`.
- The result starts with `exec completed` (or `exec failed`, `exec timed out`, `exec ran out \
of memory`, `exec cancelled`) and `in X.Y s, N tool calls`, then the output; an uncaught \
error adds its name, message and stack.";

/// `exec`'s input schema, exactly `code-mode.md` 8's.
#[must_use]
pub fn exec_input_schema() -> Value {
    json!({"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]})
}

/// The `exec` tool offered beside (or, with `only`, instead of) the `reachable` tools.
#[must_use]
pub fn exec_spec(reachable: &[ToolSpec]) -> ToolSpec {
    ToolSpec {
        name: EXEC.to_owned(),
        description: description(reachable),
        input_schema: exec_input_schema(),
    }
}

/// [`FIXED_TEXT`], a blank line, then the reachable tools in name order (`exec` left out):
/// at most [`MAX_DECLARED_TOOLS`] as a comment line (the description's first line, left out
/// when empty) over each declaration, more as one `name: first line` line each.
#[must_use]
pub fn description(reachable: &[ToolSpec]) -> String {
    let tools = listed(reachable);
    let mut out = String::from(FIXED_TEXT);
    out.push_str("\n\n");
    if tools.is_empty() {
        out.push_str("No tool is reachable from code.");
    } else if tools.len() <= MAX_DECLARED_TOOLS {
        out.push_str("Tools:");
        for t in tools {
            let line = first_line(&t.description);
            if !line.is_empty() {
                out.push_str("\n// ");
                out.push_str(&line);
            }
            out.push('\n');
            out.push_str(&declaration(t, DECLARATION_BYTES));
        }
    } else {
        out.push_str(&format!(
            "Tools ({}); call describe(name) for one's declaration:",
            tools.len()
        ));
        for t in tools {
            out.push('\n');
            out.push_str(&js_name(&t.name));
            let line = first_line(&t.description);
            if !line.is_empty() {
                out.push_str(": ");
                out.push_str(&line);
            }
        }
    }
    out
}

/// What `describe(name)` returns: the declaration of a reachable tool within
/// [`DESCRIBE_BYTES`], or `None` for any other name (`exec` included).
#[must_use]
pub fn describe(reachable: &[ToolSpec], name: &str) -> Option<String> {
    listed(reachable)
        .into_iter()
        .find(|t| t.name == name)
        .map(|t| declaration(t, DESCRIBE_BYTES))
}

/// One line, `name(input: {prop: type, opt?: type}): Promise<string>`, within `max_bytes`
/// for names of up to 64 bytes (trailing members give way to `...`).
#[must_use]
pub fn declaration(spec: &ToolSpec, max_bytes: usize) -> String {
    let head = format!("{}(input: ", js_name(&spec.name));
    let tail = "): Promise<string>";
    let room = max_bytes.saturating_sub(head.len() + tail.len());
    let ctx = Ctx {
        root: &spec.input_schema,
    };
    let input = match ctx.members(&spec.input_schema, 0) {
        Some(members) => fit_members(&members, room),
        None => {
            let t = ctx.render(&spec.input_schema, 0).0;
            if t.len() <= room {
                t
            } else {
                "unknown".to_owned()
            }
        }
    };
    format!("{head}{input}{tail}")
}

/// Whether `name` is a JavaScript identifier (ASCII letters, digits, `_`, `$`; no leading
/// digit), so `tools.name` reaches it; property access allows reserved words.
#[must_use]
pub fn is_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'$')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
}

/// `name` as written in a declaration: itself when an identifier, else a string literal.
#[must_use]
pub fn js_name(name: &str) -> String {
    if is_identifier(name) {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    }
}

/// The tools code may call, in name order, `exec` left out.
fn listed(reachable: &[ToolSpec]) -> Vec<&ToolSpec> {
    let mut tools: Vec<&ToolSpec> = reachable.iter().filter(|t| t.name != EXEC).collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools.dedup_by(|a, b| a.name == b.name);
    tools
}

/// A description's first non-empty line, trimmed, within [`TOOL_LINE_BYTES`].
fn first_line(description: &str) -> String {
    let line = description
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.len() <= TOOL_LINE_BYTES {
        line
    } else {
        format!("{}...", cut(&line, TOOL_LINE_BYTES - 3))
    }
}

/// `{a, b}` within `room` bytes; members that do not fit give way to one `...`.
fn fit_members(members: &[String], room: usize) -> String {
    let whole = format!("{{{}}}", members.join(", "));
    if whole.len() <= room {
        return whole;
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut used = "{...}".len();
    for m in members {
        let more = m.len() + ", ".len();
        if used + more > room {
            break;
        }
        used += more;
        kept.push(m);
    }
    kept.push("...");
    format!("{{{}}}", kept.join(", "))
}

/// Whether a rendered type must be parenthesized before `[]` or inside `&`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prec {
    Atom,
    Compound,
}

struct Ctx<'a> {
    root: &'a Value,
}

impl Ctx<'_> {
    /// The schema a local `$ref` names.
    fn resolve(&self, r: &str) -> Option<&Value> {
        let path = r.strip_prefix("#/")?;
        path.split('/').try_fold(self.root, |v, seg| {
            v.get(seg.replace("~1", "/").replace("~0", "~"))
        })
    }

    fn render(&self, schema: &Value, depth: usize) -> (String, Prec) {
        let unknown = || ("unknown".to_owned(), Prec::Atom);
        if depth > MAX_DEPTH {
            return unknown();
        }
        let Some(o) = schema.as_object() else {
            return unknown();
        };
        if let Some(r) = o.get("$ref").and_then(Value::as_str) {
            return match self.resolve(r) {
                Some(target) => self.render(target, depth + 1),
                None => unknown(),
            };
        }
        if let Some(c) = o.get("const") {
            return (c.to_string(), Prec::Atom);
        }
        if let Some(Value::Array(values)) = o.get("enum") {
            return union(values.iter().map(|v| (v.to_string(), Prec::Atom)).collect());
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(alts)) = o.get(key) {
                return union(alts.iter().map(|a| self.render(a, depth + 1)).collect());
            }
        }
        if let Some(Value::Array(parts)) = o.get("allOf") {
            let parts: Vec<String> = parts
                .iter()
                .map(|p| paren(self.render(p, depth + 1)))
                .collect();
            return match parts.len() {
                0 => unknown(),
                1 => (parts[0].clone(), Prec::Atom),
                _ => (parts.join(" & "), Prec::Compound),
            };
        }
        match o.get("type") {
            Some(Value::String(t)) => self.of_type(o, t, depth),
            Some(Value::Array(ts)) => union(
                ts.iter()
                    .map(|t| match t.as_str() {
                        Some(t) => self.of_type(o, t, depth),
                        None => unknown(),
                    })
                    .collect(),
            ),
            Some(_) => unknown(),
            None if o.contains_key("properties") || o.contains_key("additionalProperties") => {
                self.of_type(o, "object", depth)
            }
            None if o.contains_key("items") || o.contains_key("prefixItems") => {
                self.of_type(o, "array", depth)
            }
            None => unknown(),
        }
    }

    fn of_type(&self, o: &Map<String, Value>, t: &str, depth: usize) -> (String, Prec) {
        let atom = |s: &str| (s.to_owned(), Prec::Atom);
        match t {
            "string" => atom("string"),
            "number" | "integer" => atom("number"),
            "boolean" => atom("boolean"),
            "null" => atom("null"),
            "array" => {
                let tuple = match (o.get("prefixItems"), o.get("items")) {
                    (Some(Value::Array(items)), _) | (None, Some(Value::Array(items))) => {
                        Some(items)
                    }
                    _ => None,
                };
                if let Some(items) = tuple {
                    let items: Vec<String> =
                        items.iter().map(|i| self.render(i, depth + 1).0).collect();
                    return (format!("[{}]", items.join(", ")), Prec::Atom);
                }
                match o.get("items") {
                    Some(items) => (
                        format!("{}[]", paren(self.render(items, depth + 1))),
                        Prec::Atom,
                    ),
                    None => atom("unknown[]"),
                }
            }
            "object" => {
                let Some(members) = self.object_members(o, depth) else {
                    let value = match o.get("additionalProperties") {
                        Some(Value::Bool(false)) => return atom("{}"),
                        Some(v @ Value::Object(_)) => self.render(v, depth + 1).0,
                        _ => "unknown".to_owned(),
                    };
                    return (format!("{{[key: string]: {value}}}"), Prec::Atom);
                };
                (format!("{{{}}}", members.join(", ")), Prec::Atom)
            }
            _ => atom("unknown"),
        }
    }

    /// The members of an object schema with `properties` (after `$ref`s), else `None`.
    fn members(&self, schema: &Value, depth: usize) -> Option<Vec<String>> {
        if depth > MAX_DEPTH {
            return None;
        }
        let o = schema.as_object()?;
        if let Some(r) = o.get("$ref").and_then(Value::as_str) {
            return self.members(self.resolve(r)?, depth + 1);
        }
        let is_object = match o.get("type") {
            None => true,
            Some(t) => t.as_str() == Some("object"),
        };
        if !is_object
            || ["enum", "const", "anyOf", "oneOf", "allOf"]
                .iter()
                .any(|k| o.contains_key(*k))
        {
            return None;
        }
        self.object_members(o, depth)
    }

    fn object_members(&self, o: &Map<String, Value>, depth: usize) -> Option<Vec<String>> {
        let props = o.get("properties")?.as_object()?;
        let required: Vec<&str> = o
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut order: Vec<(&str, bool)> = Vec::new();
        for r in &required {
            if props.contains_key(*r) && !order.iter().any(|(n, _)| n == r) {
                order.push((r, true));
            }
        }
        for k in props.keys() {
            if !required.contains(&k.as_str()) {
                order.push((k, false));
            }
        }
        Some(
            order
                .into_iter()
                .map(|(name, req)| {
                    let t = self.render(&props[name], depth + 1).0;
                    let opt = if req { "" } else { "?" };
                    format!("{}{opt}: {t}", js_name(name))
                })
                .collect(),
        )
    }
}

/// Alternatives joined by ` | `, repeats dropped; any `unknown` makes the whole `unknown`.
fn union(alts: Vec<(String, Prec)>) -> (String, Prec) {
    let mut seen: Vec<(String, Prec)> = Vec::new();
    for alt in alts {
        if alt.0 == "unknown" {
            return ("unknown".to_owned(), Prec::Atom);
        }
        if !seen.iter().any(|(t, _)| *t == alt.0) {
            seen.push(alt);
        }
    }
    match seen.len() {
        0 => ("unknown".to_owned(), Prec::Atom),
        1 => seen.remove(0),
        _ => {
            let parts: Vec<String> = seen.into_iter().map(|(t, _)| t).collect();
            (parts.join(" | "), Prec::Compound)
        }
    }
}

fn paren((t, p): (String, Prec)) -> String {
    match p {
        Prec::Atom => t,
        Prec::Compound => format!("({t})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, schema: Value) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            description: format!("The {name} tool.\nMore about it."),
            input_schema: schema,
        }
    }

    /// The input type of a one-property schema `{x: <prop>}`.
    fn ty(prop: Value) -> String {
        let s = json!({"type": "object", "properties": {"x": prop}, "required": ["x"]});
        let d = declaration(&tool("f", s), DESCRIBE_BYTES);
        d.strip_prefix("f(input: {x: ")
            .and_then(|d| d.strip_suffix("}): Promise<string>"))
            .unwrap_or_else(|| panic!("{d}"))
            .to_owned()
    }

    #[test]
    fn the_exec_input_schema_is_exactly_the_specs() {
        let spec: Value = serde_json::from_str(
            r#"{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}"#,
        )
        .unwrap();
        assert_eq!(exec_input_schema(), spec);
        let e = exec_spec(&[]);
        assert_eq!((e.name.as_str(), &e.input_schema), (EXEC, &spec));
        assert!(e.description.starts_with(FIXED_TEXT));
    }

    #[test]
    fn the_fixed_text_names_the_whole_api() {
        for needle in [
            "ES2023",
            "`await`",
            "`return`",
            "tools.<name>(input)",
            "tools[\"name\"](input)",
            "`ToolError`",
            "`code`",
            "`message`",
            "`denied`",
            "`blocked`",
            "`unknown_tool`",
            "`invalid_input`",
            "`failed`",
            "`cancelled`",
            "`limit`",
            "Promise.all",
            "text(value)",
            "console.log",
            "store(key, value)",
            "load(key)",
            "describe(name)",
            "ALL_TOOLS",
            "file system, network, process, timers or modules",
            "fence",
        ] {
            assert!(FIXED_TEXT.contains(needle), "{needle}");
        }
    }

    #[test]
    fn builtin_declarations_are_one_line_with_required_members_first() {
        let specs = crate::tools::specs();
        let got: Vec<String> = specs
            .iter()
            .map(|s| declaration(s, DECLARATION_BYTES))
            .collect();
        assert_eq!(
            got,
            [
                "read_file(input: {path: string, limit?: number, offset?: number}): Promise<string>",
                "list_dir(input: {path: string}): Promise<string>",
                "grep(input: {pattern: string, case_insensitive?: boolean, glob?: string, path?: string}): Promise<string>",
                "glob(input: {pattern: string, path?: string}): Promise<string>",
                "write_file(input: {path: string, content: string}): Promise<string>",
                "edit_file(input: {path: string, old: string, new: string}): Promise<string>",
                "apply_patch(input: {patch: string}): Promise<string>",
                "shell(input: {command: string, timeout_ms?: number}): Promise<string>",
            ]
        );
    }

    #[test]
    fn a_name_that_is_not_an_identifier_is_a_string_literal() {
        let s = json!({"type": "object", "properties": {"path": {"type": "string"}, "max-depth": {"type": "integer"}}, "required": ["path"]});
        assert_eq!(
            declaration(&tool("mcp__fs__read-file", s), DECLARATION_BYTES),
            r#""mcp__fs__read-file"(input: {path: string, "max-depth"?: number}): Promise<string>"#
        );
        for ok in ["a", "_a", "$", "a1", "mcp__fs__read", "delete", "A_$9"] {
            assert!(is_identifier(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a.b", "a b", "é", "read\"file"] {
            assert!(!is_identifier(bad), "{bad}");
        }
        assert_eq!(js_name("a\"b"), r#""a\"b""#);
    }

    #[test]
    fn json_schema_types_map_to_typescript() {
        let cases = [
            (json!({"type": "string"}), "string"),
            (json!({"type": "number"}), "number"),
            (json!({"type": "integer", "minimum": 0}), "number"),
            (json!({"type": "boolean"}), "boolean"),
            (json!({"type": "null"}), "null"),
            (json!({"type": ["string", "null"]}), "string | null"),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                "string[]",
            ),
            (json!({"type": "array"}), "unknown[]"),
            (json!({"items": {"type": "number"}}), "number[]"),
            (
                json!({"type": "array", "items": {"type": ["string", "number"]}}),
                "(string | number)[]",
            ),
            (
                json!({"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}}),
                "boolean[][]",
            ),
            (
                json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]}),
                "[string, number]",
            ),
            (
                json!({"type": "array", "items": [{"type": "string"}, {"type": "null"}]}),
                "[string, null]",
            ),
            (
                json!({"type": "object", "properties": {"b": {"type": "string"}, "a": {}}, "required": ["b"]}),
                "{b: string, a?: unknown}",
            ),
            (json!({"type": "object", "properties": {}}), "{}"),
            (json!({"type": "object"}), "{[key: string]: unknown}"),
            (
                json!({"type": "object", "additionalProperties": {"type": "number"}}),
                "{[key: string]: number}",
            ),
            (
                json!({"type": "object", "additionalProperties": false}),
                "{}",
            ),
            (
                json!({"enum": ["a", "b c", 1, true, null]}),
                r#""a" | "b c" | 1 | true | null"#,
            ),
            (json!({"type": "string", "enum": ["x"]}), r#""x""#),
            (json!({"const": "fixed"}), r#""fixed""#),
            (
                json!({"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "string"}]}),
                "string | number",
            ),
            (
                json!({"oneOf": [{"type": "boolean"}, {"const": 0}]}),
                "boolean | 0",
            ),
            (json!({"anyOf": [{"type": "string"}, {}]}), "unknown"),
            (
                json!({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}]}),
                "{a: string}",
            ),
            (
                json!({"allOf": [{"anyOf": [{"type": "string"}, {"type": "null"}]}, {"type": "string"}]}),
                "(string | null) & string",
            ),
            (json!({}), "unknown"),
            (json!(true), "unknown"),
            (json!({"type": "date"}), "unknown"),
            (json!({"type": 5}), "unknown"),
            (json!({"enum": []}), "unknown"),
            (json!({"$ref": "#/nowhere"}), "unknown"),
        ];
        for (schema, want) in cases {
            assert_eq!(ty(schema.clone()), want, "{schema}");
        }
    }

    #[test]
    fn local_refs_resolve_and_recursive_ones_end_in_unknown() {
        let s = json!({
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/Point"}, "n": {"$ref": "#/definitions/Node"}},
            "required": ["p", "n"],
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
            "definitions": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}}
        });
        let d = declaration(&tool("f", s), DESCRIBE_BYTES);
        assert_eq!(
            d,
            "f(input: {p: {x: number}, n: {next?: {next?: {next?: {next?: unknown}}}}}): \
             Promise<string>"
        );
        // A top-level `$ref` names the input object itself.
        let s = json!({"$ref": "#/$defs/In", "$defs": {"In": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}});
        assert_eq!(
            declaration(&tool("f", s), DECLARATION_BYTES),
            "f(input: {q: string}): Promise<string>"
        );
    }

    #[test]
    fn an_input_that_is_not_an_object_schema_keeps_its_type() {
        assert_eq!(
            declaration(&tool("f", json!({})), DECLARATION_BYTES),
            "f(input: unknown): Promise<string>"
        );
        assert_eq!(
            declaration(&tool("f", json!({"type": "object"})), DECLARATION_BYTES),
            "f(input: {[key: string]: unknown}): Promise<string>"
        );
    }

    /// A tool whose members, as written, make a declaration of exactly `len` bytes.
    fn sized(len: usize) -> ToolSpec {
        // `f(input: {` + members + `}): Promise<string>`; each member `aNNN: string`.
        let frame = "f(input: {}): Promise<string>".len();
        let mut props = Map::new();
        let mut members: Vec<String> = Vec::new();
        let mut used = frame;
        let mut i = 0;
        while used < len {
            let sep = if members.is_empty() { 0 } else { 2 };
            let base = format!("a{i:03}");
            // The last member's name grows to land exactly on `len`.
            let mut name = base.clone();
            let left = len - used - sep;
            if left < name.len() + ": string".len() + 2 + "a000: string".len() {
                name = format!("{base}{}", "z".repeat(left - base.len() - ": string".len()));
            }
            used += sep + name.len() + ": string".len();
            members.push(name.clone());
            props.insert(name, json!({"type": "string"}));
            i += 1;
        }
        let required: Vec<Value> = members.iter().map(|m| json!(m)).collect();
        tool(
            "f",
            json!({"type": "object", "properties": props, "required": required}),
        )
    }

    #[test]
    fn a_declaration_at_the_bound_stays_whole_and_one_past_it_gives_way_to_dots() {
        let at = declaration(&sized(DECLARATION_BYTES), DECLARATION_BYTES);
        assert_eq!(at.len(), DECLARATION_BYTES, "{at}");
        assert!(!at.contains("..."), "{at}");
        let over = declaration(&sized(DECLARATION_BYTES + 1), DECLARATION_BYTES);
        assert!(over.len() <= DECLARATION_BYTES, "{over}");
        assert!(over.ends_with(", ...}): Promise<string>"), "{over}");
        assert!(over.starts_with("f(input: {a000: string, "), "{over}");
        // `describe` has more room for the same tool.
        let whole = describe(&[sized(DECLARATION_BYTES + 1)], "f").unwrap();
        assert_eq!(whole.len(), DECLARATION_BYTES + 1);
        // A first member too long for the room leaves `{...}`.
        let huge = json!({"type": "object", "properties": {"e": {"enum": vec!["v".repeat(40); 1].into_iter().chain((0..40).map(|i| format!("value{i:02}"))).collect::<Vec<_>>()}}});
        assert_eq!(
            declaration(&tool("g", huge), 100),
            "g(input: {...}): Promise<string>"
        );
    }

    #[test]
    fn up_to_20_tools_are_declared_in_name_order_without_exec() {
        let mut tools: Vec<ToolSpec> = (0..MAX_DECLARED_TOOLS)
            .rev()
            .map(|i| {
                tool(
                    &format!("t{i:02}"),
                    json!({"type": "object", "properties": {}}),
                )
            })
            .collect();
        tools.push(tool(EXEC, exec_input_schema()));
        let d = description(&tools);
        let list = d.strip_prefix(&format!("{FIXED_TEXT}\n\n")).unwrap();
        let lines: Vec<&str> = list.lines().collect();
        assert_eq!(lines[0], "Tools:");
        assert_eq!(lines.len(), 1 + 2 * MAX_DECLARED_TOOLS);
        assert_eq!(lines[1], "// The t00 tool.");
        assert_eq!(lines[2], "t00(input: {}): Promise<string>");
        assert_eq!(lines[40], "t19(input: {}): Promise<string>");
        assert!(!list.contains("exec("));
    }

    #[test]
    fn past_20_tools_names_are_listed_with_one_line_and_describe() {
        let mut tools: Vec<ToolSpec> = (0..=MAX_DECLARED_TOOLS)
            .map(|i| {
                tool(
                    &format!("t{i:02}"),
                    json!({"type": "object", "properties": {}}),
                )
            })
            .collect();
        tools[3].name = "mcp__a__b-c".into();
        let d = description(&tools);
        let list = d.strip_prefix(&format!("{FIXED_TEXT}\n\n")).unwrap();
        let lines: Vec<&str> = list.lines().collect();
        assert_eq!(
            lines[0],
            "Tools (21); call describe(name) for one's declaration:"
        );
        assert_eq!(lines.len(), 1 + MAX_DECLARED_TOOLS + 1);
        assert_eq!(lines[1], r#""mcp__a__b-c": The t03 tool."#);
        assert_eq!(lines[2], "t00: The t00 tool.");
        assert!(!list.contains("Promise<string>"));
        assert_eq!(
            describe(&tools, "t05").as_deref(),
            Some("t05(input: {}): Promise<string>")
        );
        assert_eq!(describe(&tools, "nope"), None);
        assert_eq!(describe(&[tool(EXEC, exec_input_schema())], EXEC), None);
        assert!(description(&[]).ends_with("\n\nNo tool is reachable from code."));
        tools[0].description = " \n".into();
        let d = description(&tools);
        assert!(
            d.contains("\nt01: The t01 tool.\nt02: The t02 tool.\n"),
            "{d}"
        );
        assert!(d.contains("\nt00\nt01"), "{d}");
        let bare = tool("t", json!({"type": "object", "properties": {}}));
        let d = description(&[ToolSpec {
            description: String::new(),
            ..bare
        }]);
        assert!(
            d.ends_with("\n\nTools:\nt(input: {}): Promise<string>"),
            "{d}"
        );
    }

    #[test]
    fn a_tools_line_is_its_first_line_within_200_bytes() {
        let at = "x".repeat(TOOL_LINE_BYTES);
        assert_eq!(first_line(&format!("\n  {at}  \nrest")), at);
        let over = format!("{at}é");
        let got = first_line(&over);
        assert_eq!(got.len(), TOOL_LINE_BYTES);
        assert!(got.ends_with("xxx..."), "{got}");
        assert_eq!(first_line("a\tb"), "a b");
        assert_eq!(first_line(""), "");
    }

    /// `docs/code-mode.md` shows what the model reads with the built-in tools and one MCP tool.
    #[test]
    fn the_docs_copy_of_the_description_is_the_generated_one() {
        let doc = include_str!("../../../docs/code-mode.md");
        let got = description(&doc_tools());
        let block = doc
            .split("<!-- exec description -->\n```text\n")
            .nth(1)
            .and_then(|rest| rest.split("\n```\n").next())
            .expect("docs/code-mode.md has the description block");
        assert_eq!(block, got, "regenerate the block in docs/code-mode.md");
    }

    fn doc_tools() -> Vec<ToolSpec> {
        let mut tools = crate::tools::specs();
        tools.push(ToolSpec {
            name: "mcp__fs__read-file".into(),
            description: "Read a file through the fs server.".into(),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "encoding": {"enum": ["utf8", "base64"]},
                "lines": {"type": "array", "items": {"type": "integer"}}}, "required": ["path"]}),
        });
        tools
    }
}

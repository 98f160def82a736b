//! `docs/settings.md` against the settings loader, so the page cannot drift: its top-level
//! keys are exactly the loader's, every example and JSON default loads where the row says,
//! every integer, byte and item bound accepts its edge and refuses one past it, every listed
//! choice loads and another does not, every object refuses an unknown key, `global only` keys
//! are refused in a project file, and each built-in provider's keys are the rows under it.

use magi_code::config::settings::{load, TOP_KEYS};
use serde_json::{json, Map, Value};
use std::path::Path;

/// One row of the table.
#[derive(Debug)]
struct Row {
    key: String,
    kind: String,
    default: Option<Value>,
    bounds: String,
    place: String,
    example: Option<Value>,
}

/// The first backticked text of `cell` read as JSON, if it is JSON.
fn json_in(cell: &str) -> Option<Value> {
    let inner = cell.split('`').nth(1)?;
    serde_json::from_str(inner).ok()
}

fn rows() -> Vec<Row> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/settings.md");
    let text = std::fs::read_to_string(path).unwrap();
    let table = text.split("## Keys").nth(1).expect("a Keys section");
    let rows: Vec<Row> = table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 7, "{l}");
            Row {
                key: cells[0].trim_matches('`').to_owned(),
                kind: cells[1].to_owned(),
                default: json_in(cells[2]),
                bounds: cells[3].to_owned(),
                place: cells[4].to_owned(),
                example: json_in(cells[5]),
            }
        })
        .collect();
    assert!(rows.len() > 60, "{} rows", rows.len());
    rows
}

/// A settings object with `value` at the row's key path, placeholders filled, and what a
/// placeholder's object needs beside the key (`kind`/`base_url`, `command`, `url`).
fn at(key: &str, value: Value) -> Map<String, Value> {
    let (path, base) = if let Some(rest) = key.strip_prefix("providers.<provider>") {
        (format!("providers.anthropic{rest}"), None)
    } else if let Some(rest) = key.strip_prefix("providers.<configured>") {
        let base = json!({"kind": "openai-compatible", "base_url": "http://127.0.0.1:9/v1"});
        (
            format!("providers.local{rest}"),
            Some(("providers.local", base)),
        )
    } else if let Some(rest) = key.strip_prefix("mcp.servers.<server>") {
        (
            format!("mcp.servers.fs{rest}"),
            Some(("mcp.servers.fs", json!({"command": "node"}))),
        )
    } else if let Some(rest) = key.strip_prefix("mcp.servers.<http>") {
        let base = json!({"url": "https://mcp.example.com/mcp"});
        (
            format!("mcp.servers.web{rest}"),
            Some(("mcp.servers.web", base)),
        )
    } else {
        (key.to_owned(), None)
    };
    let mut root = Value::Object(Map::new());
    if let Some((p, b)) = base {
        put(&mut root, p, b);
    }
    put(&mut root, &path, value);
    root.as_object().unwrap().clone()
}

/// Sets `value` at the dotted `path` of `root`, merging into objects already there.
fn put(root: &mut Value, path: &str, value: Value) {
    let mut cur = root;
    let parts: Vec<&str> = path.split('.').collect();
    for p in &parts[..parts.len() - 1] {
        cur = cur
            .as_object_mut()
            .unwrap()
            .entry((*p).to_owned())
            .or_insert_with(|| json!({}));
    }
    let last = parts[parts.len() - 1];
    match (cur.get_mut(last), value) {
        (Some(Value::Object(old)), Value::Object(new)) => old.extend(new),
        (_, v) => {
            cur.as_object_mut().unwrap().insert(last.to_owned(), v);
        }
    }
}

fn loads(key: &str, value: Value) -> bool {
    load(Some(at(key, value)), None).is_ok()
}

/// The integers of `lo`–`hi` in a bounds cell.
fn int_bounds(b: &str) -> Option<(u64, u64)> {
    let (lo, hi) = b.split_once('–')?;
    let n = |s: &str| s.trim().trim_matches('`').replace(',', "").parse().ok();
    Some((n(lo)?, n(hi)?))
}

/// `N` of "at most N <unit>".
fn at_most(b: &str, unit: &str) -> Option<usize> {
    let rest = b.strip_prefix("at most ")?;
    let (n, u) = rest.split_once(' ')?;
    (u == unit).then(|| n.replace(',', "").parse().ok())?
}

#[test]
fn the_top_level_keys_are_the_loaders() {
    let rows = rows();
    let mut documented: Vec<&str> = rows
        .iter()
        .map(|r| r.key.as_str())
        .filter(|k| !k.contains('.'))
        .collect();
    documented.sort_unstable();
    let mut known = TOP_KEYS.to_vec();
    known.sort_unstable();
    assert_eq!(documented, known);
}

#[test]
fn every_example_and_default_loads_where_the_row_says() {
    for r in rows() {
        let example = r
            .example
            .clone()
            .unwrap_or_else(|| panic!("{} has no example", r.key));
        assert!(
            loads(&r.key, example.clone()),
            "{}: example {example}",
            r.key
        );
        if let Some(d) = &r.default {
            assert!(loads(&r.key, d.clone()), "{}: default {d}", r.key);
        }
        let project = load(None, Some(at(&r.key, example.clone())));
        match r.place.as_str() {
            "both" => assert!(project.is_ok(), "{} in a project", r.key),
            "global only" => assert!(project.is_err(), "{} refused in a project", r.key),
            "global; ignored in a project" => {
                assert!(project.unwrap().mcp_approved.is_empty(), "{}", r.key)
            }
            other => panic!("{}: where {other:?}", r.key),
        }
    }
}

#[test]
fn every_bound_takes_its_edge_and_refuses_one_past_it() {
    let mut checked = 0;
    for r in rows() {
        if let Some((lo, hi)) = int_bounds(&r.bounds) {
            assert!(loads(&r.key, json!(hi)), "{} at {hi}", r.key);
            assert!(!loads(&r.key, json!(hi + 1)), "{} at {}", r.key, hi + 1);
            assert!(loads(&r.key, json!(lo)), "{} at {lo}", r.key);
            let below = if lo == 0 { json!(-1) } else { json!(lo - 1) };
            assert!(!loads(&r.key, below.clone()), "{} at {below}", r.key);
            checked += 1;
        } else if let Some(n) = at_most(&r.bounds, "bytes") {
            assert!(
                loads(&r.key, json!("a".repeat(n))),
                "{} at {n} bytes",
                r.key
            );
            assert!(
                !loads(&r.key, json!("a".repeat(n + 1))),
                "{} past {n}",
                r.key
            );
            checked += 1;
        } else if let Some(n) = at_most(&r.bounds, "items") {
            let first = r.example.as_ref().and_then(|e| e.get(0).cloned()).unwrap();
            let items = |count: usize| {
                let v: Vec<Value> = (0..count)
                    .map(|i| match &first {
                        Value::String(s) => json!(format!("{s}{i}")),
                        other => other.clone(),
                    })
                    .collect();
                Value::Array(v)
            };
            assert!(loads(&r.key, items(n)), "{} with {n} items", r.key);
            assert!(
                !loads(&r.key, items(n + 1)),
                "{} with {} items",
                r.key,
                n + 1
            );
            checked += 1;
        } else {
            assert_eq!(r.bounds, "—", "{}: bounds the test cannot read", r.key);
        }
    }
    assert!(checked >= 20, "{checked} bounds");
}

#[test]
fn every_choice_loads_and_another_does_not() {
    for r in rows().into_iter().filter(|r| r.kind.starts_with("one of ")) {
        let choices: Vec<Value> = r
            .kind
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|c| serde_json::from_str(c).unwrap())
            .collect();
        assert!(!choices.is_empty(), "{}", r.key);
        for c in choices {
            assert!(loads(&r.key, c.clone()), "{}: {c}", r.key);
        }
        assert!(!loads(&r.key, json!("zz-not-a-choice")), "{}", r.key);
    }
}

#[test]
fn every_object_refuses_an_unknown_key() {
    for r in rows().into_iter().filter(|r| r.kind == "object") {
        let mut v = r.example.clone().unwrap();
        v["zz_not_a_key"] = json!(true);
        assert!(!loads(&r.key, v), "{} took an unknown key", r.key);
    }
}

#[test]
fn each_built_in_providers_keys_are_the_rows_under_it() {
    let rows = rows();
    let under = |prefix: &str| -> Vec<String> {
        let mut v: Vec<String> = rows
            .iter()
            .filter_map(|r| r.key.strip_prefix(prefix).map(str::to_owned))
            .filter(|k| !k.is_empty() && !k.contains('.'))
            .collect();
        v.sort();
        v
    };
    for name in magi_code::config::providers::names() {
        let row = magi_code::config::providers::builtin(name).unwrap();
        let mut keys: Vec<String> = row
            .settings_keys()
            .iter()
            .map(|k| (*k).to_owned())
            .collect();
        keys.sort();
        let mut documented = under(&format!("providers.{name}."));
        if matches!(name, "anthropic" | "openai" | "codex") {
            documented.extend(under("providers.<provider>."));
            documented.sort();
        }
        assert_eq!(documented, keys, "providers.{name}");
    }
}

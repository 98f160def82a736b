//! `docs/frontend-guide.md` is checked against a real child: its example exchange (fenced
//! blocks marked `jsonl client` and `jsonl backend`, plus the `json script` and `json settings`
//! they run on) is replayed frame by frame and every backend frame it shows must match what the
//! binary writes.
//!
//! Matching rules (the guide's "How the example is checked" section states them for readers):
//! - Client frames are sent in order, one per line; a `"<name>"` string in them is replaced by
//!   the value that name was bound to by an earlier backend frame.
//! - Each backend block accounts for exactly the frames the child writes after the client block
//!   before it: same number, responses matched by `id` (their position among events is not
//!   fixed), events in the order shown.
//! - `message.delta` events are skipped on both sides: deltas are best effort and may be
//!   coalesced or dropped, so only `message.reconcile` is authoritative.
//! - Frames must have the same keys and values, except that the envelope's `seq` is not compared
//!   (the harness checks it rises by exactly 1) and a `"<name>"` string matches any string: the
//!   same name binds the same value everywhere, different names bind different values.
//! - After the backend block that answers a `shutdown`, stdout must close and the child exit 0;
//!   the next client block starts a new child in the same `MC_HOME` and cwd (the relaunch).

use crate::common::{Env, Server};
use serde_json::Value;
use std::collections::HashMap;
use std::fs;

/// The guide, read at run time so editing it needs no rebuild.
const GUIDE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/frontend-guide.md");

/// One fenced block of the guide that the exchange uses.
#[derive(Debug)]
enum Block {
    Script(String),
    Settings(String),
    Client(Vec<Value>),
    Backend(Vec<Value>),
}

/// The blocks of `md` whose info string is `json script`, `json settings`, `jsonl client` or
/// `jsonl backend`, in document order.
fn blocks(md: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = md.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        let frames = || {
            body.iter()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    serde_json::from_str(l)
                        .unwrap_or_else(|e| panic!("guide frame is not JSON ({e}): {l}"))
                })
                .collect()
        };
        match info.trim() {
            "json script" => out.push(Block::Script(body.join("\n"))),
            "json settings" => out.push(Block::Settings(body.join("\n"))),
            "jsonl client" => out.push(Block::Client(frames())),
            "jsonl backend" => out.push(Block::Backend(frames())),
            _ => {}
        }
    }
    out
}

/// The name inside a `"<name>"` placeholder (lowercase ASCII, digits and `_`).
fn placeholder(v: &Value) -> Option<&str> {
    let s = v.as_str()?.strip_prefix('<')?.strip_suffix('>')?;
    let ok = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    ok.then_some(s)
}

/// Placeholder bindings across the whole exchange.
#[derive(Default)]
struct Binds(HashMap<String, Value>);

impl Binds {
    fn bind(&mut self, name: &str, got: &Value, at: &str) -> Result<(), String> {
        if !got.is_string() {
            return Err(format!("{at}: <{name}> matches strings only, got {got}"));
        }
        if let Some(prev) = self.0.get(name) {
            return if prev == got {
                Ok(())
            } else {
                Err(format!("{at}: <{name}> was {prev}, now {got}"))
            };
        }
        if let Some((other, _)) = self.0.iter().find(|(_, v)| *v == got) {
            return Err(format!("{at}: <{name}> has the value of <{other}>: {got}"));
        }
        self.0.insert(name.to_owned(), got.clone());
        Ok(())
    }

    /// `v` with every placeholder replaced by its bound value.
    fn fill(&self, v: &Value) -> Value {
        if let Some(name) = placeholder(v) {
            return self.0.get(name).cloned().unwrap_or_else(|| {
                panic!("guide client frame uses <{name}> before a backend frame binds it")
            });
        }
        match v {
            Value::Array(a) => Value::Array(a.iter().map(|x| self.fill(x)).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, x)| (k.clone(), self.fill(x))).collect())
            }
            _ => v.clone(),
        }
    }

    /// Checks that `got` matches `want` at path `at`, binding placeholders.
    fn matches(&mut self, want: &Value, got: &Value, at: &str) -> Result<(), String> {
        if let Some(name) = placeholder(want) {
            return self.bind(name, got, at);
        }
        match (want, got) {
            (Value::Object(w), Value::Object(g)) => {
                let mut wk: Vec<&String> = w.keys().collect();
                let mut gk: Vec<&String> = g.keys().collect();
                wk.sort();
                gk.sort();
                if wk != gk {
                    return Err(format!(
                        "{at}: keys {wk:?} in the guide, {gk:?} from the child"
                    ));
                }
                for (k, wv) in w {
                    if at.is_empty() && k == "seq" {
                        continue;
                    }
                    self.matches(wv, &g[k], &format!("{at}.{k}"))?;
                }
                Ok(())
            }
            (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
                for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                    self.matches(wv, gv, &format!("{at}[{i}]"))?;
                }
                Ok(())
            }
            _ if want == got => Ok(()),
            _ => Err(format!("{at}: {want} in the guide, {got} from the child")),
        }
    }
}

fn is_delta(f: &Value) -> bool {
    f["event"] == "message.delta"
}

/// Reads the frames answering one backend block and matches them (rules in the module doc).
fn check_block(s: &mut Server, want: &[Value], binds: &mut Binds) {
    let want: Vec<&Value> = want.iter().filter(|f| !is_delta(f)).collect();
    let mut got = Vec::new();
    while got.len() < want.len() {
        let f = s.next();
        if !is_delta(&f) {
            got.push(f);
        }
    }
    let mut events = got.iter().filter(|f| f["type"] == "event");
    for w in &want {
        let g = if w["type"] == "response" {
            got.iter()
                .find(|g| g["type"] == "response" && g["id"] == w["id"])
                .unwrap_or_else(|| panic!("no response to {} among {got:#?}", w["id"]))
        } else {
            events.next().unwrap_or_else(|| {
                panic!("the child wrote fewer events than the guide shows: {got:#?}")
            })
        };
        if let Err(e) = binds.matches(w, g, "") {
            panic!("guide frame drifted from the binary: {e}\n guide: {w}\n child: {g}");
        }
    }
}

#[test]
fn the_guides_example_exchange_matches_a_real_child() {
    let md = fs::read_to_string(GUIDE).expect("read docs/frontend-guide.md");
    let env = Env::new();
    let script = env.root.join("script.json");
    let mut binds = Binds::default();
    let mut server: Option<Server> = None;
    let mut last_method = String::new();
    let (mut methods, mut children) = (Vec::new(), 0);
    for b in blocks(&md) {
        match b {
            Block::Script(text) => fs::write(&script, text).unwrap(),
            Block::Settings(text) => {
                let path = Value::from(script.to_str().unwrap()).to_string();
                let text = text.replace("\"<script_path>\"", &path);
                serde_json::from_str::<Value>(&text).expect("guide settings are JSON");
                env.write_global_settings_raw(text.as_bytes());
            }
            Block::Client(frames) => {
                let s = server.get_or_insert_with(|| {
                    children += 1;
                    env.spawn()
                });
                for f in frames {
                    last_method = f["method"]
                        .as_str()
                        .expect("client frame method")
                        .to_owned();
                    methods.push(last_method.clone());
                    s.send_line(&binds.fill(&f).to_string());
                }
            }
            Block::Backend(frames) => {
                let s = server
                    .as_mut()
                    .expect("a backend block before any client block");
                check_block(s, &frames, &mut binds);
                if last_method == "shutdown" {
                    s.expect_eof();
                    assert_eq!(s.exit_code(), 0, "exit status after shutdown");
                    s.assert_stderr_empty();
                    server = None;
                }
            }
        }
    }
    assert!(server.is_none(), "the exchange ends with a shutdown");
    assert_eq!(children, 2, "the exchange shows a relaunch");
    for m in [
        "initialize",
        "session.create",
        "turn.start",
        "approval.answer",
        "turn.cancel",
        "history.page",
        "shutdown",
        "session.open",
    ] {
        assert!(
            methods.iter().any(|x| x == m),
            "the exchange never sends {m}"
        );
    }
    assert_eq!(
        fs::read_to_string(env.cwd.join("notes.txt")).expect("the approved write ran"),
        "hello\n"
    );
}

#[test]
fn the_matcher_binds_placeholders_and_rejects_drift() {
    let want: Value = serde_json::json!({"seq": 1, "a": "<x>", "b": ["<y>", 2]});
    let ok: Value = serde_json::json!({"seq": 9, "a": "p", "b": ["q", 2]});
    let mut binds = Binds::default();
    assert_eq!(binds.matches(&want, &ok, ""), Ok(()), "seq is not compared");
    assert!(Binds::default()
        .matches(
            &want,
            &serde_json::json!({"seq": 1, "a": "p", "b": ["q", 3]}),
            ""
        )
        .is_err());
    assert!(Binds::default()
        .matches(
            &want,
            &serde_json::json!({"seq": 1, "a": "p", "b": ["q", 2], "c": 0}),
            ""
        )
        .is_err());
    assert!(
        Binds::default()
            .matches(
                &want,
                &serde_json::json!({"seq": 1, "a": "p", "b": ["p", 2]}),
                ""
            )
            .is_err(),
        "different names bind different values"
    );
    assert!(
        binds
            .matches(
                &serde_json::json!({"a": "<x>"}),
                &serde_json::json!({"a": "other"}),
                ""
            )
            .is_err(),
        "one name binds one value"
    );
    assert!(
        Binds::default()
            .matches(&serde_json::json!("<x>"), &serde_json::json!(null), "")
            .is_err(),
        "placeholders match strings only"
    );
    assert_eq!(
        binds.fill(&serde_json::json!({"k": ["<y>"]})),
        serde_json::json!({"k": ["q"]})
    );
}

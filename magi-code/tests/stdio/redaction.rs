//! Redaction through the real binary (`decisions.md` 35): exactly the listed secrets become
//! `[redacted]`, ordinary words, digests and IDs are shown as written, and a completed reply's
//! deltas concatenate to its reconciled text, which equals its history entry.

use crate::common::fake_llm::{chat_text, FakeLlm};
use crate::common::{
    events, fake_llm_env, history_entries, init_params, is_event, reconciled, result, run_turn,
    start_session, until_finished, until_match, write_script, Env, Server,
};
use serde_json::{json, Value};
use std::time::Duration;

/// A GitHub token shape: `ghp_` and 36 more.
const GHP: &str = "ghp_R8xk2Qm9Vt4Lw7Nz1Pb6Hc3Jd5Fg0Sa2Ye4U";

/// The text of every `message.delta`, joined.
fn deltas(frames: &[Value]) -> String {
    events(frames, "message.delta")
        .iter()
        .map(|f| f["data"]["text"].as_str().unwrap())
        .collect()
}

/// The assistant entries' text of the history at `revision`, joined.
fn assistant_history(s: &mut Server, id: &str, sid: &str, revision: &str) -> String {
    history_entries(s, id, sid, revision)
        .iter()
        .filter(|e| e["kind"] == "assistant")
        .map(|e| e["text"].as_str().unwrap().to_owned())
        .collect()
}

/// `text` cut into pieces of `n` bytes (ASCII text).
fn pieces(text: &str, n: usize) -> Vec<&str> {
    (0..text.len())
        .step_by(n)
        .map(|i| &text[i..(i + n).min(text.len())])
        .collect()
}

/// Asserts no frame holds `secret` or any 6-byte piece of it.
#[track_caller]
fn never_shown(frames: &[Value], secret: &str) {
    for f in frames {
        let raw = f.to_string();
        for i in 0..=secret.len() - 6 {
            let piece = &secret[i..i + 6];
            assert!(
                !raw.contains(piece),
                "{piece:?} of the secret reached {raw}"
            );
        }
    }
}

/// The `run.finished` revision ending `frames`.
fn revision(frames: &[Value]) -> String {
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "completed", "{fin}");
    fin["revision"].as_str().unwrap().to_owned()
}

#[test]
fn ordinary_words_reconcile_unchanged() {
    let env = Env::new();
    let (mut s, sid) = start_session(&env, &[]);
    let prompt = "This is risk-free: the task-runner and the desk-lamp work";
    let frames = run_turn(&mut s, &sid, prompt);
    assert_eq!(deltas(&frames), prompt);
    assert_eq!(reconciled(&frames), prompt);
    let rev = revision(&frames);
    assert_eq!(assistant_history(&mut s, "p", &sid, &rev), prompt);
}

#[test]
fn a_key_split_over_seven_byte_deltas_never_reaches_a_frame() {
    let reply = format!(
        "Your token is {GHP}, the commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b and the ID \
         3f2b8c1e9d4a4f6b8e2c7a1d5b9e0f34 stay; a risk-free task-runner too."
    );
    let llm = FakeLlm::start(vec![chat_text(&pieces(&reply, 7))]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "show me");
    let want = reply.replace(GHP, "[redacted]");
    never_shown(&frames, GHP);
    // The provider's 7-byte deltas may coalesce into fewer frames; each reached the
    // redactor on its own.
    assert_eq!(deltas(&frames), want, "the deltas concatenate to the reply");
    assert_eq!(reconciled(&frames), want);
    let rev = revision(&frames);
    let page = history_entries(&mut s, "p", &sid, &rev);
    never_shown(&page, GHP);
    assert_eq!(assistant_history(&mut s, "p2", &sid, &rev), want);
    s.call("bye", "shutdown", &json!({}));
    assert_eq!(s.exit_code_within(Duration::from_secs(10)), 0);

    // A new child opening the session projects the same entry.
    let mut again = env.spawn();
    again.call("init", "initialize", &init_params(&[]));
    let open = again.call("o", "session.open", &json!({"session_id": sid}));
    let rev = result(&open)["revision"].as_str().unwrap().to_owned();
    assert_eq!(assistant_history(&mut again, "p", &sid, &rev), want);
}

#[test]
fn a_loaded_api_key_is_redacted_wherever_it_is_echoed() {
    // Not shaped like any credential: only loading it makes it one.
    let key = "Lk9f3Qw7Zr2Tn8vX";
    let reply = format!("The configured key is {key} (as sent).");
    let llm = FakeLlm::start(vec![chat_text(&pieces(&reply, 7))]);
    let mut env = fake_llm_env(
        &llm,
        &json!({"providers": {"local": {"api_key_env": "LOCAL_KEY"}}}),
    );
    env.set_var("LOCAL_KEY", key);
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "echo the key");
    let seen = llm.next(Duration::from_secs(5));
    assert!(
        seen.headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == &format!("Bearer {key}")),
        "the key was loaded and sent"
    );
    never_shown(&frames, key);
    let want = "The configured key is [redacted] (as sent).";
    assert_eq!(deltas(&frames), want);
    assert_eq!(reconciled(&frames), want);
    let rev = revision(&frames);
    assert_eq!(assistant_history(&mut s, "p", &sid, &rev), want);
}

#[test]
fn an_approval_shows_a_digest_and_an_id_as_written() {
    let env = Env::new();
    let command = "git reset --hard 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b && echo 3f2b8c1e9d4a4f6b8e2c7a1d5b9e0f34";
    write_script(
        &env,
        json!([{"steps": [{"tool": {"name": "shell", "input": {"command": command}}}, {"text": "ok"}]}]),
        None,
    );
    let (mut s, sid) = start_session(&env, &[]);
    s.request(
        "t1",
        "turn.start",
        &json!({"session_id": sid, "prompt": "reset"}),
    );
    let run_id = result(&s.response("t1"))["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (req, before) = until_match(&mut s, is_event("approval.requested"));
    let shown = format!("shell: {command}");
    assert_eq!(req["data"]["summary"], shown.as_str());
    let started: Vec<&Value> = before.iter().filter(|f| f["event"] == "activity").collect();
    assert_eq!(started[0]["data"]["summary"], shown.as_str());
    let approval_id = req["data"]["approval_id"].as_str().unwrap().to_owned();
    s.request(
        "a1",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": approval_id, "allow": false}),
    );
    let frames = until_finished(&mut s);
    let rev = revision(&frames);
    let page = history_entries(&mut s, "p", &sid, &rev);
    assert!(
        page.iter()
            .any(|e| e["kind"] == "activity" && e["text"].as_str().unwrap().contains(&shown)),
        "the history shows it as written: {page:?}"
    );
}

#[test]
fn a_ghp_token_is_redacted_whole() {
    let env = Env::new();
    let (mut s, sid) = start_session(&env, &[]);
    // The echo streams the prompt back as its reply in three deltas, cutting the tokens.
    let prompt = format!("use \"{GHP}\" or ({GHP}), please");
    let frames = run_turn(&mut s, &sid, &prompt);
    let live: Vec<Value> = frames
        .into_iter()
        .filter(|f| f["event"] == "message.delta" || f["event"] == "message.reconcile")
        .collect();
    never_shown(&live, GHP);
    let want = "use \"[redacted]\" or ([redacted]), please";
    assert_eq!(deltas(&live), want);
    assert_eq!(reconciled(&live), want);
}

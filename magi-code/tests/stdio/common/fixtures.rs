//! Files a test writes before it spawns a child: stored histories under `MC_HOME/sessions`,
//! model-catalog caches and scripts for the `scripted` provider.

use super::server::Env;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

/// The timestamp of every record and cache the fixtures write.
pub const TS: &str = "2026-11-30T12:00:00Z";

// ---------------------------------------------------------------------------------------------
// Histories.

/// `MC_HOME/sessions`, created (0700) if missing.
pub fn sessions_dir(env: &Env) -> PathBuf {
    let dir = env.home().join("sessions");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .expect("create sessions folder");
    dir
}

/// Every record of session `sid`'s history, parsed (each line must be JSON).
pub fn session_records(env: &Env, sid: &str) -> Vec<Value> {
    fs::read_to_string(sessions_dir(env).join(format!("{sid}.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The canonical cwd of children spawned in `env`.
pub fn canonical_cwd(env: &Env) -> String {
    fs::canonicalize(&env.cwd)
        .expect("canonical cwd")
        .to_str()
        .expect("UTF-8 cwd")
        .to_owned()
}

/// A record of type `ty` for session `id` with `extra` fields.
pub fn rec(ty: &str, id: &str, extra: &Value) -> Value {
    let mut m = json!({ "type": ty, "session_id": id, "ts": TS });
    for (k, v) in extra.as_object().expect("extra fields object") {
        m[k] = v.clone();
    }
    m
}

/// `session_meta` with the canonical cwd of `env`.
pub fn meta(env: &Env, id: &str) -> Value {
    rec("session_meta", id, &json!({ "cwd": canonical_cwd(env) }))
}

/// One completed run: `user_input`, optional `assistant_message`, `run_finished`.
pub fn run(id: &str, run_id: &str, prompt: &str, reply: Option<&str>) -> Vec<Value> {
    let mut v = vec![rec(
        "user_input",
        id,
        &json!({ "run_id": run_id, "text": prompt }),
    )];
    if let Some(t) = reply {
        v.push(rec(
            "assistant_message",
            id,
            &json!({ "run_id": run_id, "message_id": format!("a-{run_id}"), "text": t }),
        ));
    }
    v.push(rec(
        "run_finished",
        id,
        &json!({ "run_id": run_id, "outcome": "completed" }),
    ));
    v
}

pub fn jsonl(records: &[Value]) -> Vec<u8> {
    let mut b = Vec::new();
    for r in records {
        serde_json::to_writer(&mut b, r).unwrap();
        b.push(b'\n');
    }
    b
}

/// Writes `sessions/<id>.jsonl` with `records`; returns its path.
pub fn write_history(env: &Env, id: &str, records: &[Value]) -> PathBuf {
    write_raw(env, &format!("{id}.jsonl"), &jsonl(records))
}

/// Writes `sessions/<name>` with raw bytes; returns its path.
pub fn write_raw(env: &Env, name: &str, bytes: &[u8]) -> PathBuf {
    let p = sessions_dir(env).join(name);
    fs::write(&p, bytes).expect("write history");
    p
}

/// A minimal valid history of `id` for `env`'s cwd.
pub fn tiny(env: &Env, id: &str) -> PathBuf {
    write_history(env, id, &[meta(env, id)])
}

// ---------------------------------------------------------------------------------------------
// Model-catalog caches.

/// Writes `MC_HOME/cache/models/<provider>.json` listing `models`.
pub fn write_catalog_cache(env: &Env, provider: &str, models: Value) {
    let dir = env.home().join("cache").join("models");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join(format!("{provider}.json")),
        json!({"provider": provider, "fetched_at": TS, "models": models}).to_string(),
    )
    .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Scripts.

/// Writes `<tmp>/script.json` with `turns` and global settings selecting the `scripted`
/// provider's `script` model on it, plus `tools` settings when given.
pub fn write_script(env: &Env, turns: Value, tools: Option<Value>) {
    let script = env.root.join("script.json");
    fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
    let mut settings = json!({"model": "script", "providers": {"scripted": {"script": script}}});
    if let Some(t) = tools {
        settings["tools"] = t;
    }
    env.write_global_settings(&settings);
}

//! Every frame a real-pipe test reads is checked against the protocol's JSON Schema
//! (`docs/schema/magi-code.local-agent.v1.json`, built by `magi_code::wire::schema`), and
//! every request the tests build with [`super::frame`] that the backend answers with a
//! `result` is checked against `$defs.Request`. Requests answered with an error are not
//! checked: many tests send invalid params on purpose.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

const ID: &str = "https://magi-code.dev/schema/magi-code.local-agent.v1.json";

struct Compiled {
    schemas: boon::Schemas,
    frame: boon::SchemaIndex,
    request: boon::SchemaIndex,
}

fn compiled() -> &'static Compiled {
    static C: OnceLock<Compiled> = OnceLock::new();
    C.get_or_init(|| {
        let mut schemas = boon::Schemas::new();
        let mut c = boon::Compiler::new();
        c.enable_format_assertions();
        c.add_resource(ID, magi_code::wire::schema())
            .expect("schema resource");
        let frame = c.compile(ID, &mut schemas).expect("root schema compiles");
        let request = c
            .compile(&format!("{ID}#/$defs/Request"), &mut schemas)
            .expect("$defs.Request compiles");
        Compiled {
            schemas,
            frame,
            request,
        }
    })
}

/// Requests sent through `Server::request`, by child pid and request ID.
fn sent() -> &'static Mutex<HashMap<(u32, String), Value>> {
    static S: OnceLock<Mutex<HashMap<(u32, String), Value>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Remembers a request built by the test helpers, to check it once it is answered.
pub fn record_request(pid: u32, frame: &str) {
    let Ok(v) = serde_json::from_str::<Value>(frame) else {
        return;
    };
    if let Some(id) = v["id"].as_str() {
        let key = (pid, id.to_owned());
        sent()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, v);
    }
}

/// Panics unless `frame` validates against the schema; a `result` also checks its request.
#[track_caller]
pub fn check_frame(pid: u32, frame: &Value) {
    let c = compiled();
    if let Err(e) = c.schemas.validate(frame, c.frame) {
        panic!("frame breaks docs/schema/magi-code.local-agent.v1.json: {e:#}\nframe: {frame}");
    }
    if frame.get("result").is_some() {
        let key = (pid, frame["id"].as_str().unwrap_or_default().to_owned());
        let request = sent()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        if let Some(r) = request {
            if let Err(e) = c.schemas.validate(&r, c.request) {
                panic!("an accepted request breaks $defs.Request: {e:#}\nrequest: {r}");
            }
        }
    }
}

//! Correlation, sans-IO: output lines go in, typed responses come out by request ID (never by
//! order: responses overtake each other and events interleave), events queue in order. Every
//! frame is checked on the way in (one `instance_id`, `seq` rising by exactly 1, a known frame
//! type and event name, a response only to an outstanding request), and the durable
//! acknowledgements feed the [`SavedSession`].

use super::error::ClientError;
use super::saved::SavedSession;
use crate::wire::results::{SelectionSetResult, SessionResult};
use crate::wire::{Event, EventFrame, ResponseBody, ResponseFrame};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};

/// The most events held unread; past it the client fails closed rather than grow.
pub const EVENT_BACKLOG: usize = 8_192;

/// An outstanding request: its method, and whether its response is wanted.
#[derive(Debug)]
struct Outstanding {
    method: &'static str,
    keep: bool,
}

/// What one line was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrived {
    /// A response, now waiting under its ID (or dropped when discarded).
    Response,
    /// An event, now queued.
    Event,
}

/// One child's incoming side.
#[derive(Debug)]
pub struct Inbox {
    outstanding: HashMap<String, Outstanding>,
    answered: HashMap<String, (&'static str, ResponseBody)>,
    events: VecDeque<Event>,
    backlog: usize,
    seq: u64,
    instance_id: Option<String>,
    saved: SavedSession,
}

impl Default for Inbox {
    fn default() -> Self {
        Self::with_backlog(EVENT_BACKLOG)
    }
}

impl Inbox {
    /// An inbox holding at most `backlog` unread events.
    #[must_use]
    pub fn with_backlog(backlog: usize) -> Self {
        Self {
            outstanding: HashMap::new(),
            answered: HashMap::new(),
            events: VecDeque::new(),
            backlog,
            seq: 0,
            instance_id: None,
            saved: SavedSession::default(),
        }
    }

    /// Records a request just written, so its response correlates.
    pub fn sent(&mut self, id: &str, method: &'static str) {
        let o = Outstanding { method, keep: true };
        self.outstanding.insert(id.to_owned(), o);
    }

    /// The response to `id` is not wanted: it is dropped when it arrives (or now).
    pub fn discard(&mut self, id: &str) {
        if let Some(o) = self.outstanding.get_mut(id) {
            o.keep = false;
        }
        self.answered.remove(id);
    }

    /// Takes the response to `id` with its method, once arrived.
    pub fn take(&mut self, id: &str) -> Option<(&'static str, ResponseBody)> {
        self.answered.remove(id)
    }

    /// Whether `id` was sent and its response has not arrived.
    #[must_use]
    pub fn waiting(&self, id: &str) -> bool {
        self.outstanding.contains_key(id)
    }

    /// The oldest unread event.
    pub fn pop_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The session to save for a relaunch.
    #[must_use]
    pub fn saved(&self) -> &SavedSession {
        &self.saved
    }

    /// This child's `instance_id`, from its first frame.
    #[must_use]
    pub fn instance_id(&self) -> Option<&str> {
        self.instance_id.as_deref()
    }

    /// Takes one output line (without its LF).
    pub fn push_line(&mut self, line: &str) -> Result<Arrived, ClientError> {
        let v: Value = serde_json::from_str(line).map_err(|_| ClientError::Protocol("not JSON"))?;
        let (iid, seq) = (v.get("instance_id"), v.get("seq").and_then(Value::as_u64));
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        let Some(iid) = iid.and_then(Value::as_str) else {
            return Err(ClientError::Protocol("no instance_id"));
        };
        match &self.instance_id {
            Some(known) if known != iid => {
                return Err(ClientError::Protocol("instance_id changed"))
            }
            Some(_) => {}
            None => self.instance_id = Some(iid.to_owned()),
        }
        if seq != Some(self.seq + 1) {
            return Err(ClientError::Protocol("seq is not the next number"));
        }
        self.seq += 1;
        match kind {
            "response" => {
                let f: ResponseFrame = serde_json::from_value(v)
                    .map_err(|_| ClientError::Protocol("malformed response"))?;
                self.response(f)?;
                Ok(Arrived::Response)
            }
            "event" => {
                let f: EventFrame = serde_json::from_value(v)
                    .map_err(|_| ClientError::Protocol("unknown or malformed event"))?;
                if self.events.len() >= self.backlog {
                    return Err(ClientError::Backlog);
                }
                if let Event::InputPersisted(d) = &f.event {
                    self.saved.input_persisted(d);
                }
                self.events.push_back(f.event);
                Ok(Arrived::Event)
            }
            _ => Err(ClientError::Protocol("unknown frame type")),
        }
    }

    fn response(&mut self, f: ResponseFrame) -> Result<(), ClientError> {
        let uncorrelated = |body: ResponseBody| match body {
            ResponseBody::Error(e) => ClientError::Uncorrelated(e),
            ResponseBody::Result(_) => ClientError::Protocol("response to no outstanding request"),
        };
        let Some(id) = f.id else {
            return Err(uncorrelated(f.body));
        };
        let Some(o) = self.outstanding.remove(&id) else {
            return Err(uncorrelated(f.body));
        };
        if let ResponseBody::Result(r) = &f.body {
            match o.method {
                "session.create" | "session.open" => {
                    if let Ok(s) = SessionResult::deserialize(r) {
                        self.saved.attached(&s);
                    }
                }
                "selection.set" => {
                    if let Ok(s) = SelectionSetResult::deserialize(r) {
                        self.saved.selection_set(&s);
                    }
                }
                _ => {}
            }
        }
        if o.keep {
            self.answered.insert(id, (o.method, f.body));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Wire {
        seq: u64,
    }

    impl Wire {
        fn frame(&mut self, mut v: Value) -> String {
            self.seq += 1;
            v["protocol"] = json!("magi-code.local-agent");
            v["version"] = json!(1);
            v["instance_id"] = json!("00000000-0000-4000-8000-000000000001");
            v["seq"] = json!(self.seq);
            v.to_string()
        }
        fn result(&mut self, id: &str, result: Value) -> String {
            self.frame(json!({"type": "response", "id": id, "result": result}))
        }
        fn error(&mut self, id: Value, code: &str) -> String {
            self.frame(json!({"type": "response", "id": id, "error": {"code": code}}))
        }
        fn event(&mut self, event: &str, data: Value) -> String {
            self.frame(json!({"type": "event", "event": event, "data": data}))
        }
        fn persisted(&mut self, sid: &str) -> String {
            self.event(
                "input.persisted",
                json!({"session_id": sid, "run_id": "r", "message_id": "m", "durable": true, "revision": "v"}),
            )
        }
    }

    fn created(sid: &str) -> Value {
        json!({"session_id": sid, "durable": false, "revision": "v", "notices": []})
    }

    #[test]
    fn responses_correlate_by_id_out_of_order_with_events_between() {
        let (mut ib, mut w) = (Inbox::default(), Wire { seq: 0 });
        ib.sent("a", "status");
        ib.sent("b", "session.create");
        assert_eq!(
            ib.push_line(&w.result("b", created("s1"))),
            Ok(Arrived::Response)
        );
        assert_eq!(ib.push_line(&w.persisted("s1")), Ok(Arrived::Event));
        assert!(ib.waiting("a") && !ib.waiting("b"));
        assert_eq!(
            ib.push_line(&w.error(json!("a"), "busy")),
            Ok(Arrived::Response)
        );
        let (m, a) = ib.take("a").unwrap();
        assert_eq!(
            (m, a),
            (
                "status",
                ResponseBody::Error(crate::wire::results::ErrorObject {
                    code: "busy".into()
                })
            )
        );
        let (m, b) = ib.take("b").unwrap();
        assert_eq!(m, "session.create");
        assert!(matches!(b, ResponseBody::Result(r) if r["session_id"] == "s1"));
        assert!(ib.take("a").is_none(), "a response is taken once");
        assert!(matches!(ib.pop_event(), Some(Event::InputPersisted(_))));
        assert!(ib.pop_event().is_none());
    }

    #[test]
    fn uncorrelated_responses_fail_closed() {
        let (mut ib, mut w) = (Inbox::default(), Wire { seq: 0 });
        assert_eq!(
            ib.push_line(&w.error(Value::Null, "invalid_request")),
            Err(ClientError::Uncorrelated(
                crate::wire::results::ErrorObject {
                    code: "invalid_request".into()
                }
            ))
        );
        assert_eq!(
            ib.push_line(&w.result("never-sent", json!({}))),
            Err(ClientError::Protocol("response to no outstanding request"))
        );
        ib.sent("x", "status");
        ib.discard("x");
        let r = w.error(json!("x"), "busy");
        assert_eq!(ib.push_line(&r), Ok(Arrived::Response));
        assert!(ib.take("x").is_none(), "a discarded response is dropped");
        let again = w.error(json!("x"), "busy");
        assert!(ib.push_line(&again).is_err(), "two responses to one ID");
    }

    #[test]
    fn envelope_rules_are_checked() {
        let diag = json!({"session_id": "s", "run_id": "r", "code": "x", "summary": ""});
        let fresh = || (Inbox::default(), Wire { seq: 0 });
        let (mut ib, mut w) = fresh();
        assert!(ib.push_line("not json").is_err());
        ib.push_line(&w.event("diagnostic", diag.clone())).unwrap();
        w.seq += 1; // one frame lost
        assert_eq!(
            ib.push_line(&w.event("diagnostic", diag.clone())),
            Err(ClientError::Protocol("seq is not the next number"))
        );
        let (mut ib, mut w) = fresh();
        assert!(ib.push_line(&w.event("message.shout", json!({}))).is_err());
        let (mut ib, mut w) = fresh();
        assert_eq!(
            ib.push_line(&w.frame(json!({"type": "notice"}))),
            Err(ClientError::Protocol("unknown frame type"))
        );
        let (mut ib, mut w) = fresh();
        ib.push_line(&w.event("diagnostic", diag.clone())).unwrap();
        let mut v: Value = serde_json::from_str(&w.event("diagnostic", diag)).unwrap();
        v["instance_id"] = json!("00000000-0000-4000-8000-000000000002");
        assert_eq!(
            ib.push_line(&v.to_string()),
            Err(ClientError::Protocol("instance_id changed"))
        );
    }

    #[test]
    fn the_event_backlog_holds_at_its_edge() {
        let (mut ib, mut w) = (Inbox::with_backlog(3), Wire { seq: 0 });
        for _ in 0..3 {
            ib.push_line(&w.persisted("s")).unwrap();
        }
        assert_eq!(ib.push_line(&w.persisted("s")), Err(ClientError::Backlog));
    }

    #[test]
    fn the_saved_session_follows_the_acknowledgements() {
        let (mut ib, mut w) = (Inbox::default(), Wire { seq: 0 });
        ib.sent("c", "session.create");
        ib.push_line(&w.result("c", created("s1"))).unwrap();
        assert_eq!(ib.saved().attached_id(), Some("s1"));
        assert_eq!(ib.saved().to_save(), None, "created, never persisted");
        ib.push_line(&w.persisted("s1")).unwrap();
        assert_eq!(ib.saved().to_save(), Some("s1"));
    }
}

//! The one session ID a client may save for a relaunch: the attached session, and only once a
//! durable acknowledgement said it is on disk (protocol: "Client saves relaunch ID only after
//! either durable acknowledgement" — `input.persisted`, or `selection.set` with
//! `durable:true`; a session that `session.open` found durable is on disk already).

use crate::wire::events::InputPersistedData;
use crate::wire::results::{SelectionSetResult, SessionResult};

/// The attached session and whether it is durable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SavedSession {
    attached: Option<String>,
    durable: bool,
}

impl SavedSession {
    /// A `session.create` or `session.open` result: the new attachment, durable only when the
    /// result says so (never for `session.create`).
    pub fn attached(&mut self, r: &SessionResult) {
        self.attached = Some(r.session_id.clone());
        self.durable = r.durable;
    }

    /// An `input.persisted` acknowledgement.
    pub fn input_persisted(&mut self, d: &InputPersistedData) {
        self.acknowledged(&d.session_id);
    }

    /// A `selection.set` result (always `durable:true`).
    pub fn selection_set(&mut self, r: &SelectionSetResult) {
        self.acknowledged(&r.session_id);
    }

    fn acknowledged(&mut self, sid: &str) {
        // An acknowledgement of a session that is no longer attached says nothing of this one.
        if self.attached.as_deref() == Some(sid) {
            self.durable = true;
        }
    }

    /// The session ID to save for a relaunch, once durable; `None` before.
    #[must_use]
    pub fn to_save(&self) -> Option<&str> {
        self.attached.as_deref().filter(|_| self.durable)
    }

    /// The attached session, durable or not.
    #[must_use]
    pub fn attached_id(&self) -> Option<&str> {
        self.attached.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::common::True;

    fn session(sid: &str, durable: bool) -> SessionResult {
        SessionResult {
            session_id: sid.into(),
            durable,
            revision: "rev".into(),
            notices: vec![],
        }
    }

    fn persisted(sid: &str) -> InputPersistedData {
        InputPersistedData {
            session_id: sid.into(),
            run_id: "r".into(),
            message_id: "m".into(),
            durable: True,
            revision: "rev".into(),
        }
    }

    #[test]
    fn a_created_session_is_saved_only_after_input_persisted() {
        let mut s = SavedSession::default();
        assert_eq!(s.to_save(), None);
        s.attached(&session("a", false));
        assert_eq!(s.to_save(), None, "lazy: nothing on disk yet");
        assert_eq!(s.attached_id(), Some("a"));
        s.input_persisted(&persisted("a"));
        assert_eq!(s.to_save(), Some("a"));
    }

    #[test]
    fn an_acknowledgement_of_another_session_does_not_count() {
        let mut s = SavedSession::default();
        s.attached(&session("a", false));
        s.input_persisted(&persisted("b"));
        assert_eq!(s.to_save(), None);
        // Switching to a fresh lazy session forgets the old one's durability.
        s.attached(&session("a", true));
        assert_eq!(s.to_save(), Some("a"), "opened durable");
        s.attached(&session("c", false));
        assert_eq!(s.to_save(), None);
    }

    #[test]
    fn a_durable_selection_set_counts() {
        let v = serde_json::json!({
            "session_id": "a", "catalog_revision": "c", "scope": "session", "durable": true,
            "history_revision": null, "notices": [],
            "selection": {"provider": "p", "model": "m", "revision": "r",
                "requested_effort": "default", "effective_effort": null,
                "effort_support": "unsupported", "permitted_efforts": ["default"]}
        });
        let r: SelectionSetResult = serde_json::from_value(v).unwrap();
        let mut s = SavedSession::default();
        s.attached(&session("a", false));
        s.selection_set(&r);
        assert_eq!(s.to_save(), Some("a"));
    }
}

//! The `initialize` and `status` results.

use super::state::{Engine, State};
use crate::caps::{Capability, TOOL_CARD_KINDS};
use crate::limits;
use serde_json::{json, Map, Value};

impl Engine {
    pub(super) fn capability_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&str> = Capability::BASE.iter().map(|c| c.as_str()).collect();
        for c in [
            Capability::ToolCards,
            Capability::ClientTools,
            Capability::ToolDetails,
        ] {
            if self.negotiated.contains(c) {
                names.push(c.as_str());
            }
        }
        names
    }

    /// The `extensions` member: one descriptor per negotiated extension that has one, `None`
    /// when none was negotiated (base clients see no member at all, `decisions.md` 32).
    pub(super) fn extensions_object(&self) -> Option<Value> {
        let mut m = Map::new();
        for c in self.negotiated.iter() {
            if let Some(d) = self.descriptor(c) {
                m.insert(c.as_str().to_owned(), d);
            }
        }
        (!m.is_empty()).then_some(Value::Object(m))
    }

    /// The descriptor of an extension that has one (`extensions.md`).
    fn descriptor(&self, c: Capability) -> Option<Value> {
        match c {
            Capability::ToolCards => Some(
                json!({ "version": 1, "kinds": TOOL_CARD_KINDS, "card_bytes": limits::CARD_BYTES }),
            ),
            Capability::ClientTools => Some(json!({ "version": 1, "tools": self.client_tools })),
            Capability::ToolDetails => Some(json!({
                "version": 1,
                "tail_lines": limits::TOOL_TAIL_LINES,
                "tail_bytes": limits::TOOL_TAIL_BYTES,
                "diff_bytes": limits::TOOL_DIFF_BYTES
            })),
            _ => None,
        }
    }

    pub(super) fn limits_object(&self) -> Value {
        let mut m = Map::new();
        let discover: &[(&str, u64)] = if self.negotiated.contains(Capability::SessionDiscover) {
            limits::DISCOVER_ADVERTISED
        } else {
            &[]
        };
        let client_tools: &[(&str, u64)] = if self.negotiated.contains(Capability::ClientTools) {
            limits::CLIENT_TOOLS_ADVERTISED
        } else {
            &[]
        };
        for (k, v) in limits::ADVERTISED
            .iter()
            .chain(discover)
            .chain(client_tools)
        {
            m.insert((*k).to_owned(), Value::from(*v));
        }
        Value::Object(m)
    }

    /// The `initialize` result: capabilities, limits, status, and `extensions` only when a
    /// descriptor extension was negotiated.
    pub(super) fn initialize_result(&self) -> Value {
        let mut result = json!({
            "capabilities": self.capability_names(),
            "limits": self.limits_object(),
            "status": self.status_value(),
        });
        if let (Some(ext), Some(o)) = (self.extensions_object(), result.as_object_mut()) {
            o.insert("extensions".to_owned(), ext);
        }
        result
    }

    /// The `status` result for the current state.
    #[must_use]
    pub fn status_value(&self) -> Value {
        match &self.state {
            State::Ready(v) => json!({
                "state": if self.run.is_some() { "running" } else { "idle" },
                "readiness": "ready",
                "provider": v.provider,
                "model": v.model,
                "context_id": v.context_id,
                "session_id": v.session_id,
                "run_id": self.run,
                "selection": v.selection,
            }),
            State::Failed {
                code,
                provider,
                model,
                context_id,
            } => json!({
                "state": "failed",
                "readiness": code.as_str(),
                "provider": provider,
                "model": model,
                "context_id": context_id,
                "session_id": null,
                "run_id": null,
                "selection": null,
            }),
            _ => json!({
                "state": "starting",
                "readiness": "initializing",
                "provider": null,
                "model": null,
                "context_id": null,
                "session_id": null,
                "run_id": null,
                "selection": null,
            }),
        }
    }
}

//! The method table and one exact params shape per method.

use crate::caps::Capability;
use crate::client_tools::{self, ClientToolDef};
use crate::error::ErrorCode;
use crate::ids::{is_id_grammar, is_session_id};
use crate::limits::{
    CLIENT_TOOL_OUTPUT_BYTES, NAME_BYTES, PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX, PROMPT_BYTES,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A method this protocol knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// One of the sixteen base operations, named like its capability.
    Base(Capability),
    /// `client.tool.result` of the `client.tools` extension.
    ClientToolResult,
}

impl Method {
    /// Looks a method name up.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        if name == "client.tool.result" {
            return Some(Self::ClientToolResult);
        }
        Capability::parse(name)
            .filter(|c| !c.is_extension())
            .map(Self::Base)
    }

    /// The capability that admits this method.
    #[must_use]
    pub const fn capability(self) -> Capability {
        match self {
            Self::Base(c) => c,
            Self::ClientToolResult => Capability::ClientTools,
        }
    }
}

/// An explicit effort level of `selection.set`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
    /// `xhigh`.
    Xhigh,
    /// `max`.
    Max,
}

impl Effort {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "low" => Self::Low,
            "medium" => Self::Medium,
            "high" => Self::High,
            "xhigh" => Self::Xhigh,
            "max" => Self::Max,
            _ => return None,
        })
    }
}

/// The `effort` request object of `selection.set`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum EffortRequest {
    /// Keep the previously requested effort.
    Keep,
    /// Reset to the backend's no-override policy.
    Default,
    /// Request this explicit level.
    Set {
        /// The level.
        value: Effort,
    },
}

/// A request whose envelope and params passed every check, ready for dispatch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
#[allow(missing_docs)] // Fields are the params of the protocol, named as on the wire.
pub enum Request {
    Initialize {
        required: Vec<String>,
        /// The `client.tools` definitions; empty (and absent from traces) otherwise.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        client_tools: Vec<ClientToolDef>,
    },
    Status,
    Shutdown,
    SessionCreate,
    SessionOpen {
        session_id: String,
    },
    SessionList {
        revision: Option<String>,
        cursor: Option<String>,
        limit: u64,
    },
    SessionDiscover {
        cursor: Option<String>,
        limit: u64,
    },
    ModelCatalog {
        revision: Option<String>,
        cursor: Option<String>,
        limit: u64,
    },
    ModelCatalogStatus,
    ModelRefresh {
        provider: String,
    },
    OperationCancel {
        request_id: String,
    },
    SelectionSet {
        session_id: String,
        selection_revision: String,
        catalog_revision: String,
        provider: String,
        model: String,
        effort: EffortRequest,
    },
    HistoryPage {
        session_id: String,
        revision: String,
        cursor: Option<String>,
    },
    TurnStart {
        session_id: String,
        prompt: String,
    },
    TurnCancel {
        session_id: String,
        run_id: String,
    },
    ApprovalAnswer {
        session_id: String,
        run_id: String,
        approval_id: String,
        allow: bool,
    },
    ClientToolResult {
        session_id: String,
        run_id: String,
        call_id: String,
        ok: bool,
        output: String,
    },
}

type R<T> = Result<T, ErrorCode>;
const BAD: ErrorCode = ErrorCode::InvalidParams;

fn exact<'a>(params: &'a Value, allowed: &[&str]) -> R<&'a Map<String, Value>> {
    let map = params.as_object().ok_or(BAD)?;
    if map.keys().all(|k| allowed.contains(&k.as_str())) {
        Ok(map)
    } else {
        Err(BAD)
    }
}

fn string<'a>(map: &'a Map<String, Value>, key: &str) -> R<&'a str> {
    map.get(key).and_then(Value::as_str).ok_or(BAD)
}

fn id_field(map: &Map<String, Value>, key: &str) -> R<String> {
    let s = string(map, key)?;
    if is_id_grammar(s) {
        Ok(s.to_owned())
    } else {
        Err(BAD)
    }
}

fn session_field(map: &Map<String, Value>) -> R<String> {
    let s = string(map, "session_id")?;
    if is_session_id(s) {
        Ok(s.to_owned())
    } else {
        Err(BAD)
    }
}

fn nullable_id(map: &Map<String, Value>, key: &str) -> R<Option<String>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if is_id_grammar(s) => Ok(Some(s.clone())),
        Some(_) => Err(BAD),
    }
}

fn page_limit(map: &Map<String, Value>) -> R<u64> {
    match map.get("limit") {
        None => Ok(PAGE_LIMIT_DEFAULT),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=PAGE_LIMIT_MAX).contains(&n) => Ok(n),
            _ => Err(BAD),
        },
    }
}

/// A provider or model name: 1–256 bytes with no control characters.
fn name_field(map: &Map<String, Value>, key: &str) -> R<String> {
    let s = string(map, key)?;
    if !s.is_empty() && s.len() <= NAME_BYTES && !s.chars().any(char::is_control) {
        Ok(s.to_owned())
    } else {
        Err(BAD)
    }
}

fn revision_pair(map: &Map<String, Value>) -> R<(Option<String>, Option<String>)> {
    let revision = nullable_id(map, "revision")?;
    let cursor = nullable_id(map, "cursor")?;
    if revision.is_some() != cursor.is_some() {
        return Err(BAD);
    }
    Ok((revision, cursor))
}

fn effort(map: &Map<String, Value>) -> R<EffortRequest> {
    let Some(v) = map.get("effort") else {
        return Ok(EffortRequest::Keep);
    };
    let obj = exact(v, &["mode", "value"])?;
    match (string(obj, "mode")?, obj.get("value")) {
        ("keep", None) => Ok(EffortRequest::Keep),
        ("default", None) => Ok(EffortRequest::Default),
        ("set", Some(Value::String(s))) => Effort::parse(s)
            .map(|value| EffortRequest::Set { value })
            .ok_or(BAD),
        _ => Err(BAD),
    }
}

/// Whether a prompt is blank: every character is Unicode white space (`decisions.md` 15).
#[must_use]
pub fn is_blank(s: &str) -> bool {
    s.chars().all(char::is_whitespace)
}

/// Parses `initialize` params into the required capability names (grammar checked later by
/// negotiation, which orders count before grammar).
pub fn initialize_names(params: &Value) -> R<Vec<&str>> {
    let map = params.as_object().ok_or(BAD)?;
    let list = map
        .get("required_capabilities")
        .and_then(Value::as_array)
        .ok_or(BAD)?;
    let mut names = Vec::with_capacity(list.len());
    for v in list {
        names.push(v.as_str().ok_or(BAD)?);
    }
    let client_tools = names.contains(&Capability::ClientTools.as_str());
    let allowed: &[&str] = if client_tools {
        &["required_capabilities", "client_tools"]
    } else {
        &["required_capabilities"]
    };
    exact(params, allowed)?;
    Ok(names)
}

/// Parses `initialize`'s `client_tools` (after negotiation): required exactly when
/// `client.tools` is among the required names.
pub fn initialize_client_tools(params: &Value, names: &[&str]) -> R<Vec<ClientToolDef>> {
    client_tools::parse(params, names.contains(&Capability::ClientTools.as_str()))
}

fn client_tool_result(params: &Value) -> R<Request> {
    let m = exact(params, &["session_id", "run_id", "call_id", "ok", "output"])?;
    let output = string(m, "output")?;
    if output.len() > CLIENT_TOOL_OUTPUT_BYTES {
        return Err(BAD);
    }
    Ok(Request::ClientToolResult {
        session_id: session_field(m)?,
        run_id: id_field(m, "run_id")?,
        call_id: id_field(m, "call_id")?,
        ok: m.get("ok").and_then(Value::as_bool).ok_or(BAD)?,
        output: output.to_owned(),
    })
}

/// Parses the params of every method but `initialize` into a [`Request`].
///
/// `nested_duplicates` is true when the strict parser saw a duplicate key below the top level.
pub fn parse_params(method: Method, params: &Value, nested_duplicates: bool) -> R<Request> {
    if nested_duplicates {
        return Err(BAD);
    }
    let Method::Base(cap) = method else {
        return client_tool_result(params);
    };
    use Capability as C;
    match cap {
        C::Initialize => {
            let names = initialize_names(params)?;
            Ok(Request::Initialize {
                client_tools: initialize_client_tools(params, &names)?,
                required: names.into_iter().map(str::to_owned).collect(),
            })
        }
        C::Status | C::Shutdown | C::SessionCreate | C::ModelCatalogStatus => {
            exact(params, &[])?;
            Ok(match cap {
                C::Status => Request::Status,
                C::Shutdown => Request::Shutdown,
                C::SessionCreate => Request::SessionCreate,
                _ => Request::ModelCatalogStatus,
            })
        }
        C::SessionOpen | C::SessionList | C::SessionDiscover | C::ModelCatalog => {
            listing(cap, params)
        }
        C::ModelRefresh => {
            let m = exact(params, &["provider"])?;
            Ok(Request::ModelRefresh {
                provider: name_field(m, "provider")?,
            })
        }
        C::OperationCancel => {
            let m = exact(params, &["request_id"])?;
            Ok(Request::OperationCancel {
                request_id: id_field(m, "request_id")?,
            })
        }
        C::SelectionSet => selection_set(params),
        C::HistoryPage | C::TurnStart | C::TurnCancel | C::ApprovalAnswer => {
            session_request(cap, params)
        }
        C::ToolCards | C::ClientTools | C::ToolDetails => Err(ErrorCode::UnsupportedMethod),
    }
}

/// `session.open`, `session.list`, `session.discover` and `model.catalog`.
fn listing(cap: Capability, params: &Value) -> R<Request> {
    use Capability as C;
    Ok(match cap {
        C::SessionOpen => {
            let m = exact(params, &["session_id"])?;
            Request::SessionOpen {
                session_id: session_field(m)?,
            }
        }
        C::SessionDiscover => {
            let m = exact(params, &["cursor", "limit"])?;
            Request::SessionDiscover {
                cursor: nullable_id(m, "cursor")?,
                limit: page_limit(m)?,
            }
        }
        _ => {
            let m = exact(params, &["revision", "cursor", "limit"])?;
            let (revision, cursor) = revision_pair(m)?;
            let limit = page_limit(m)?;
            if cap == C::SessionList {
                Request::SessionList {
                    revision,
                    cursor,
                    limit,
                }
            } else {
                Request::ModelCatalog {
                    revision,
                    cursor,
                    limit,
                }
            }
        }
    })
}

/// `selection.set`.
fn selection_set(params: &Value) -> R<Request> {
    let m = exact(
        params,
        &[
            "session_id",
            "selection_revision",
            "catalog_revision",
            "provider",
            "model",
            "effort",
        ],
    )?;
    Ok(Request::SelectionSet {
        session_id: session_field(m)?,
        selection_revision: id_field(m, "selection_revision")?,
        catalog_revision: id_field(m, "catalog_revision")?,
        provider: name_field(m, "provider")?,
        model: name_field(m, "model")?,
        effort: effort(m)?,
    })
}

/// `history.page`, `turn.start`, `turn.cancel` and `approval.answer`.
fn session_request(cap: Capability, params: &Value) -> R<Request> {
    use Capability as C;
    Ok(match cap {
        C::HistoryPage => {
            let m = exact(params, &["session_id", "revision", "cursor"])?;
            Request::HistoryPage {
                session_id: session_field(m)?,
                revision: id_field(m, "revision")?,
                cursor: nullable_id(m, "cursor")?,
            }
        }
        C::TurnStart => {
            let m = exact(params, &["session_id", "prompt"])?;
            let session_id = session_field(m)?;
            let prompt = string(m, "prompt")?;
            if prompt.len() > PROMPT_BYTES || is_blank(prompt) {
                return Err(BAD);
            }
            Request::TurnStart {
                session_id,
                prompt: prompt.to_owned(),
            }
        }
        C::TurnCancel => {
            let m = exact(params, &["session_id", "run_id"])?;
            Request::TurnCancel {
                session_id: session_field(m)?,
                run_id: id_field(m, "run_id")?,
            }
        }
        _ => {
            let m = exact(params, &["session_id", "run_id", "approval_id", "allow"])?;
            Request::ApprovalAnswer {
                session_id: session_field(m)?,
                run_id: id_field(m, "run_id")?,
                approval_id: id_field(m, "approval_id")?,
                allow: m.get("allow").and_then(Value::as_bool).ok_or(BAD)?,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(cap: Capability, v: Value) -> R<Request> {
        parse_params(Method::Base(cap), &v, false)
    }

    #[test]
    fn exact_fields() {
        assert!(p(Capability::Status, json!({})).is_ok());
        assert_eq!(p(Capability::Status, json!({"x":1})), Err(BAD));
        assert_eq!(p(Capability::Status, json!([])), Err(BAD));
        assert_eq!(p(Capability::Status, json!(null)), Err(BAD));
        assert_eq!(
            parse_params(Method::Base(Capability::Status), &json!({}), true),
            Err(BAD)
        );
    }

    #[test]
    fn page_limits() {
        let ok = |l: Value| p(Capability::SessionList, json!({"limit": l}));
        assert!(ok(json!(1)).is_ok());
        assert!(ok(json!(100)).is_ok());
        assert_eq!(ok(json!(0)), Err(BAD));
        assert_eq!(ok(json!(101)), Err(BAD));
        assert_eq!(ok(json!(1.0)), Err(BAD));
        assert_eq!(ok(json!(null)), Err(BAD));
        assert_eq!(
            p(Capability::SessionList, json!({"revision":"a"})),
            Err(BAD)
        );
        assert!(p(
            Capability::SessionList,
            json!({"revision":"a","cursor":"b"})
        )
        .is_ok());
        assert!(p(
            Capability::SessionList,
            json!({"revision":null,"cursor":null})
        )
        .is_ok());
    }

    #[test]
    fn prompt_bounds() {
        let t = |s: String| p(Capability::TurnStart, json!({"session_id":"s","prompt":s}));
        assert!(t("x".repeat(PROMPT_BYTES)).is_ok());
        assert_eq!(t("x".repeat(PROMPT_BYTES + 1)), Err(BAD));
        assert_eq!(t(" \t\u{3000}\n".into()), Err(BAD));
        assert_eq!(t(String::new()), Err(BAD));
    }

    #[test]
    fn effort_shapes() {
        let s = |e: Value| {
            p(
                Capability::SelectionSet,
                json!({"session_id":"s","selection_revision":"a","catalog_revision":"b","provider":"p","model":"m","effort":e}),
            )
        };
        assert!(s(json!({"mode":"keep"})).is_ok());
        assert!(s(json!({"mode":"set","value":"max"})).is_ok());
        assert_eq!(s(json!({"mode":"set","value":"default"})), Err(BAD));
        assert_eq!(s(json!({"mode":"set"})), Err(BAD));
        assert_eq!(s(json!({"mode":"keep","value":"low"})), Err(BAD));
        assert_eq!(s(json!(null)), Err(BAD));
        assert_eq!(s(json!({"mode":"Keep"})), Err(BAD));
    }

    #[test]
    fn session_id_grammar() {
        assert!(p(
            Capability::SessionOpen,
            json!({"session_id": "a".repeat(64)})
        )
        .is_ok());
        assert_eq!(
            p(
                Capability::SessionOpen,
                json!({"session_id": "a".repeat(65)})
            ),
            Err(BAD)
        );
        assert_eq!(
            p(Capability::SessionOpen, json!({"session_id": "../x"})),
            Err(BAD)
        );
    }

    #[test]
    fn client_tool_result_shape_and_output_bound() {
        let r = |v: Value| parse_params(Method::ClientToolResult, &v, false);
        let base = |output: String| json!({"session_id":"s","run_id":"r","call_id":"c","ok":true,"output":output});
        assert!(r(base("x".repeat(CLIENT_TOOL_OUTPUT_BYTES))).is_ok());
        assert_eq!(r(base("x".repeat(CLIENT_TOOL_OUTPUT_BYTES + 1))), Err(BAD));
        assert_eq!(
            r(base(String::new())),
            Ok(Request::ClientToolResult {
                session_id: "s".into(),
                run_id: "r".into(),
                call_id: "c".into(),
                ok: true,
                output: String::new(),
            })
        );
        let mut extra = base(String::new());
        extra["x"] = json!(1);
        assert_eq!(r(extra), Err(BAD));
        for key in ["session_id", "run_id", "call_id", "ok", "output"] {
            let mut missing = base(String::new());
            missing.as_object_mut().unwrap().remove(key);
            assert_eq!(r(missing), Err(BAD), "{key}");
        }
        let mut not_bool = base(String::new());
        not_bool["ok"] = json!("true");
        assert_eq!(r(not_bool), Err(BAD));
        assert_eq!(
            Method::parse("client.tool.result"),
            Some(Method::ClientToolResult)
        );
        assert_eq!(Method::parse("client.tool.call"), None);
    }
}

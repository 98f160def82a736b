//! The frames: the method and event tables, the Rust envelope types a typed client
//! (de)serializes, and the assembly of the root schema from them.

use super::common::{ErrorCodeName, Protocol, RequestId, TypeEvent, TypeResponse, Uuid, Version};
use super::events::{
    ActivityData, ApprovalRequestedData, ClientToolCallData, ClientToolCancelData, DiagnosticData,
    InputPersistedData, MessageDeltaData, MessageReconcileData, RunFinishedData, ToolCardData,
    ToolDiffData, ToolOutputData,
};
use super::requests::{
    ApprovalAnswerParams, ClientToolResultParams, EmptyParams, HistoryPageParams, InitializeParams,
    ModelRefreshParams, OperationCancelParams, SelectionSetParams, SessionDiscoverParams,
    SessionOpenParams, SnapshotPageParams, TurnCancelParams, TurnStartParams,
};
use super::results::{
    CancelResult, ErrorObject, HistoryPageResult, InitializeResult, ModelCatalogResult,
    ModelCatalogStatusResult, ModelRefreshResult, RecordedResult, SelectionSetResult,
    SessionDiscoverResult, SessionListResult, SessionResult, ShutdownResult, Status,
    TurnStartResult,
};
use protocol_core::envelope::PROTOCOL;
use schemars::generate::SchemaSettings;
use schemars::SchemaGenerator;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

macro_rules! methods {
    ($($(#[$m:meta])* $v:ident => $name:literal, $params:ty, $result:ty;)*) => {
        /// A method call: `method` and its exact `params`.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "method", content = "params")]
        pub enum Call { $($(#[$m])* #[serde(rename = $name)] $v($params),)* }

        /// Every method name, in the protocol's order.
        pub const METHODS: &[&str] = &[$($name,)*];

        /// `(method, params schema, result schema)` per method, registering their `$defs`.
        fn method_schemas(g: &mut SchemaGenerator) -> Vec<(&'static str, Value, Value)> {
            vec![$(($name, g.subschema_for::<$params>().to_value(), g.subschema_for::<$result>().to_value()),)*]
        }
    };
}

methods! {
    /// `initialize`.
    Initialize => "initialize", InitializeParams, InitializeResult;
    /// `status`.
    Status => "status", EmptyParams, Status;
    /// `shutdown`.
    Shutdown => "shutdown", EmptyParams, ShutdownResult;
    /// `session.create`.
    SessionCreate => "session.create", EmptyParams, SessionResult;
    /// `session.open`.
    SessionOpen => "session.open", SessionOpenParams, SessionResult;
    /// `session.list`.
    SessionList => "session.list", SnapshotPageParams, SessionListResult;
    /// `session.discover` (negotiated).
    SessionDiscover => "session.discover", SessionDiscoverParams, SessionDiscoverResult;
    /// `model.catalog`.
    ModelCatalog => "model.catalog", SnapshotPageParams, ModelCatalogResult;
    /// `model.catalog.status` (negotiated).
    ModelCatalogStatus => "model.catalog.status", EmptyParams, ModelCatalogStatusResult;
    /// `model.refresh` (negotiated).
    ModelRefresh => "model.refresh", ModelRefreshParams, ModelRefreshResult;
    /// `operation.cancel` (negotiated).
    OperationCancel => "operation.cancel", OperationCancelParams, CancelResult;
    /// `selection.set`.
    SelectionSet => "selection.set", SelectionSetParams, SelectionSetResult;
    /// `history.page`.
    HistoryPage => "history.page", HistoryPageParams, HistoryPageResult;
    /// `turn.start`.
    TurnStart => "turn.start", TurnStartParams, TurnStartResult;
    /// `turn.cancel`.
    TurnCancel => "turn.cancel", TurnCancelParams, CancelResult;
    /// `approval.answer`.
    ApprovalAnswer => "approval.answer", ApprovalAnswerParams, RecordedResult;
    /// `client.tool.result` (negotiated `client.tools`).
    ClientToolResult => "client.tool.result", ClientToolResultParams, RecordedResult;
}

macro_rules! events {
    ($($(#[$m:meta])* $v:ident => $name:literal, $data:ty;)*) => {
        /// A run event: `event` and its `data`.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "event", content = "data")]
        pub enum Event { $($(#[$m])* #[serde(rename = $name)] $v($data),)* }

        /// Every event name.
        pub const EVENTS: &[&str] = &[$($name,)*];

        impl Event {
            /// The event's name, as the frame's `event` member carries it.
            #[must_use]
            pub const fn name(&self) -> &'static str {
                match self { $(Self::$v(_) => $name,)* }
            }

            /// The event's `data` object: its type, serialized (the frame's body is never
            /// written by hand, so the compiler and the schema check its shape).
            #[must_use]
            pub fn into_data(self) -> Value {
                match self { $(Self::$v(d) => super::common::body(&d),)* }
            }
        }

        fn event_schemas(g: &mut SchemaGenerator) -> Vec<(&'static str, Value)> {
            vec![$(($name, g.subschema_for::<$data>().to_value()),)*]
        }
    };
}

events! {
    /// `input.persisted`.
    InputPersisted => "input.persisted", InputPersistedData;
    /// `message.delta`.
    MessageDelta => "message.delta", MessageDeltaData;
    /// `message.reconcile`.
    MessageReconcile => "message.reconcile", MessageReconcileData;
    /// `activity`.
    Activity => "activity", ActivityData;
    /// `approval.requested`.
    ApprovalRequested => "approval.requested", ApprovalRequestedData;
    /// `diagnostic`.
    Diagnostic => "diagnostic", DiagnosticData;
    /// `run.finished`.
    RunFinished => "run.finished", RunFinishedData;
    /// `tool.card` (negotiated `tool.cards`).
    ToolCard => "tool.card", ToolCardData;
    /// `client.tool.call` (negotiated `client.tools`).
    ClientToolCall => "client.tool.call", ClientToolCallData;
    /// `client.tool.cancel` (negotiated `client.tools`).
    ClientToolCancel => "client.tool.cancel", ClientToolCancelData;
    /// `tool.output` (negotiated `tool.details`).
    ToolOutput => "tool.output", ToolOutputData;
    /// `tool.diff` (negotiated `tool.details`).
    ToolDiff => "tool.diff", ToolDiffData;
}

/// A request frame: exactly `protocol`, `version`, `id`, `method`, `params`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestFrame {
    /// `magi-code.local-agent`.
    pub protocol: Protocol,
    /// `1`.
    pub version: Version,
    /// A fresh request ID.
    pub id: String,
    /// The method and its params.
    #[serde(flatten)]
    pub call: Call,
}

/// A response frame; the client reads `result` as its method's result type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResponseFrame {
    /// `magi-code.local-agent`.
    pub protocol: Protocol,
    /// `1`.
    pub version: Version,
    /// `response`.
    #[serde(rename = "type")]
    pub kind: TypeResponse,
    /// The child's UUID.
    pub instance_id: String,
    /// The frame's sequence number, from 1.
    pub seq: u64,
    /// The request's ID; null when the request's identity was invalid.
    pub id: Option<String>,
    /// `result` or `error`.
    #[serde(flatten)]
    pub body: ResponseBody,
}

/// Exactly one of `result` and `error`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseBody {
    /// The method's result.
    Result(Value),
    /// A code-only error.
    Error(ErrorObject),
}

/// An event frame (`decisions.md` 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventFrame {
    /// `magi-code.local-agent`.
    pub protocol: Protocol,
    /// `1`.
    pub version: Version,
    /// `event`.
    #[serde(rename = "type")]
    pub kind: TypeEvent,
    /// The child's UUID.
    pub instance_id: String,
    /// The frame's sequence number, from 1.
    pub seq: u64,
    /// The event and its data.
    #[serde(flatten)]
    pub event: Event,
}

fn def(name: &str) -> Value {
    json!({ "$ref": format!("#/$defs/{name}") })
}

/// An exact object schema.
/// `schema` with `description` set.
fn described(mut schema: Value, description: &str) -> Value {
    schema["description"] = description.into();
    schema
}

fn object(props: Vec<(&str, Value)>, required: &[&str]) -> Value {
    let properties: Map<String, Value> = props.into_iter().map(|(k, v)| (k.into(), v)).collect();
    json!({ "type": "object", "additionalProperties": false, "required": required, "properties": properties })
}

/// The members every output frame begins with.
fn head(kind: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("protocol", json!({ "const": PROTOCOL })),
        (
            "version",
            json!({ "const": protocol_core::envelope::VERSION }),
        ),
        ("type", json!({ "const": kind })),
        ("instance_id", def("Uuid")),
        ("seq", json!({ "type": "integer", "minimum": 1 })),
    ]
}

const HEAD: [&str; 5] = ["protocol", "version", "type", "instance_id", "seq"];

/// The whole contract as one JSON Schema value (draft 2020-12), keys in byte order.
#[must_use]
pub fn schema() -> Value {
    let mut g = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    // The frames name these directly; registering them puts them in `$defs`.
    let _ = g.subschema_for::<RequestId>();
    let _ = g.subschema_for::<Uuid>();
    let _ = g.subschema_for::<ErrorCodeName>();
    let _ = g.subschema_for::<ErrorObject>();
    let methods = method_schemas(&mut g);
    let events = event_schemas(&mut g);
    let mut defs = g.take_definitions(true);

    let requests = request_frames(&methods);
    let mut results: Vec<Value> = Vec::new();
    for (_, _, r) in &methods {
        if !results.contains(r) {
            results.push(r.clone());
        }
    }
    let event_frames = event_frames(&events);
    let mut result_head = head("response");
    result_head.push(("id", def("RequestId")));
    result_head.push(("result", json!({ "anyOf": results })));
    let mut error_head = head("response");
    error_head.push((
        "id",
        json!({ "anyOf": [def("RequestId"), { "type": "null" }] }),
    ));
    error_head.push(("error", def("ErrorObject")));
    let mut req = HEAD.to_vec();
    req.push("id");
    let (mut rreq, mut ereq) = (req.clone(), req);
    rreq.push("result");
    ereq.push("error");

    let composed = [
        (
            "Request",
            json!({ "description": "Any request the backend accepts: one method with its exact params.", "oneOf": requests }),
        ),
        (
            "ResultFrame",
            described(object(result_head, &rreq), "A response with a result."),
        ),
        (
            "ErrorFrame",
            described(
                object(error_head, &ereq),
                "A response with an error; `id` is null when the request's identity was invalid or unrecoverable.",
            ),
        ),
        (
            "EventFrame",
            json!({ "description": "A run event frame.", "oneOf": event_frames }),
        ),
    ];
    for (k, v) in composed.into_iter().chain(name_maps(&methods, &events)) {
        defs.insert(k.into(), v);
    }
    canonical(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://magi-code.dev/schema/magi-code.local-agent.v1.json",
        "title": "magi-code.local-agent version 1",
        "description": "Any frame the backend writes: a response with a result, a response with an error, or a run event. $defs.Request validates any request the backend accepts.",
        "oneOf": [def("ResultFrame"), def("ErrorFrame"), def("EventFrame")],
        "$defs": defs,
    }))
}

/// One request frame per method: the envelope head and that method's exact params.
fn request_frames(methods: &[(&'static str, Value, Value)]) -> Vec<Value> {
    methods
        .iter()
        .map(|(name, params, _)| {
            let props = vec![
                ("protocol", json!({ "const": PROTOCOL })),
                (
                    "version",
                    json!({ "const": protocol_core::envelope::VERSION }),
                ),
                ("id", def("RequestId")),
                ("method", json!({ "const": name })),
                ("params", params.clone()),
            ];
            object(props, &["protocol", "version", "id", "method", "params"])
        })
        .collect()
}

/// `Methods` (each method's params and result by name) and `Events` (each event's data by
/// name): every name is listed, so `Methods["turn.start"]["params"]` and
/// `Events["run.finished"]` name types in TypeScript.
fn name_maps(
    methods: &[(&'static str, Value, Value)],
    events: &[(&'static str, Value)],
) -> [(&'static str, Value); 2] {
    let method_names: Vec<&str> = methods.iter().map(|(name, _, _)| *name).collect();
    let method_map: Map<String, Value> = methods
        .iter()
        .map(|(name, params, result)| {
            let entry = object(
                vec![("params", params.clone()), ("result", result.clone())],
                &["params", "result"],
            );
            ((*name).to_owned(), entry)
        })
        .collect();
    let event_names: Vec<&str> = events.iter().map(|(name, _)| *name).collect();
    let event_map: Map<String, Value> = events
        .iter()
        .map(|(name, data)| ((*name).to_owned(), data.clone()))
        .collect();
    [
        (
            "Methods",
            json!({ "description": "Each method's params and result (documentation map, validates nothing on the wire).", "type": "object", "additionalProperties": false, "required": method_names, "properties": method_map }),
        ),
        (
            "Events",
            json!({ "description": "Each event's data by event name (documentation map, validates nothing on the wire).", "type": "object", "additionalProperties": false, "required": event_names, "properties": event_map }),
        ),
    ]
}

/// One event frame per event: the frame head, the event's name and its data.
fn event_frames(events: &[(&'static str, Value)]) -> Vec<Value> {
    events
        .iter()
        .map(|(name, data)| {
            let mut props = head("event");
            props.push(("event", json!({ "const": name })));
            props.push(("data", data.clone()));
            let mut req = HEAD.to_vec();
            req.extend(["event", "data"]);
            object(props, &req)
        })
        .collect()
}

/// `v` with every object's keys in byte order, whatever map serde_json was built with.
fn canonical(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.into_iter().map(canonical).collect()),
        other => other,
    }
}

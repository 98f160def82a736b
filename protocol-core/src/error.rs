//! Wire error codes and the reasons a child stops.

use serde::{Deserialize, Serialize};

macro_rules! codes {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident => $s:literal,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name { $($(#[$vm])* #[serde(rename = $s)] $v,)* }
        impl $name {
            /// Every code, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$v,)*];
            /// The code as it appears on the wire.
            #[must_use]
            pub const fn as_str(self) -> &'static str { match self { $(Self::$v => $s,)* } }
            /// Parses a wire code.
            #[must_use]
            pub fn parse(s: &str) -> Option<Self> { match s { $($s => Some(Self::$v),)* _ => None } }
        }
    };
}

codes! {
    /// The closed set of error codes this backend puts on the wire. Codes carry no input text.
    ErrorCode {
        /// Depth or framing structure (including an empty line).
        InvalidFrame => "invalid_frame",
        /// JSON, UTF-8, envelope or identity fault.
        InvalidRequest => "invalid_request",
        /// Params that break their method's exact shape or bounds.
        InvalidParams => "invalid_params",
        /// Wrong `protocol` or `version`; the child closes.
        ProtocolMismatch => "protocol_mismatch",
        /// A method name this protocol does not know.
        UnsupportedMethod => "unsupported_method",
        /// A capability not supported or not negotiated.
        UnsupportedCapability => "unsupported_capability",
        /// The method needs admitted or completed initialization.
        NotInitialized => "not_initialized",
        /// `initialize` after admission.
        AlreadyInitialized => "already_initialized",
        /// A request ID seen before in this child.
        DuplicateId => "duplicate_id",
        /// The 4,097th request ID; the child closes.
        RequestLimit => "request_limit",
        /// An input line over 65,536 bytes; the child closes.
        FrameTooLarge => "frame_too_large",
        /// EOF inside a frame.
        IncompleteFrame => "incomplete_frame",
        /// Startup: settings are not valid.
        ConfigurationInvalid => "configuration_invalid",
        /// Startup or selection: the provider is not locally ready.
        ProviderUnavailable => "provider_unavailable",
        /// Startup: an agent profile is not valid.
        ProfileInvalid => "profile_invalid",
        /// Startup: an enabled MCP server failed.
        McpUnavailable => "mcp_unavailable",
        /// Startup was cancelled by shutdown or EOF.
        StartupCancelled => "startup_cancelled",
        /// Startup failed for another reason.
        StartupFailed => "startup_failed",
        /// Another operation or run owns the worker.
        Busy => "busy",
        /// The request names a session other than the attached one.
        StaleSession => "stale_session",
        /// No such session, or nothing attached.
        SessionMissing => "session_missing",
        /// Another child owns the session.
        SessionBusy => "session_busy",
        /// The stored session is unsafe, unreadable or malformed.
        SessionInvalid => "session_invalid",
        /// The session belongs to another workspace.
        CwdMismatch => "cwd_mismatch",
        /// The stored history exceeds its budget.
        HistoryLimit => "history_limit",
        /// A revision or cursor is no longer valid.
        StaleRevision => "stale_revision",
        /// Content exceeds its bound.
        ContentLimit => "content_limit",
        /// The operation was cancelled.
        OperationCancelled => "operation_cancelled",
        /// A discovery bound was exceeded.
        DiscoveryLimit => "discovery_limit",
        /// The session folder cannot be listed safely.
        DiscoveryUnavailable => "discovery_unavailable",
        /// A catalog bound was exceeded.
        CatalogLimit => "catalog_limit",
        /// A catalog cache is unsafe or unreadable.
        CatalogUnavailable => "catalog_unavailable",
        /// The catalog snapshot is no longer valid.
        StaleCatalog => "stale_catalog",
        /// The selection revision is no longer current.
        StaleSelection => "stale_selection",
        /// The requested provider/model is not an admitted choice.
        SelectionInvalid => "selection_invalid",
        /// The requested effort is not supported.
        EffortUnsupported => "effort_unsupported",
        /// A durable write failed.
        PersistenceFailed => "persistence_failed",
        /// The run is not the active run.
        StaleRun => "stale_run",
        /// The approval is unknown, answered or expired.
        StaleApproval => "stale_approval",
        /// The run failed.
        ExecutionFailed => "execution_failed",
        /// Critical output could not be delivered.
        OutputUnavailable => "output_unavailable",
        /// `operation.cancel` names no in-flight operation.
        StaleOperation => "stale_operation",
        /// `model.refresh` failed; the old cache is intact.
        RefreshFailed => "refresh_failed",
        /// A client tool call ID is unknown or answered.
        StaleCall => "stale_call",
    }
}

impl ErrorCode {
    /// Whether this code may be the outcome of an admitted startup.
    #[must_use]
    pub const fn is_startup(self) -> bool {
        matches!(
            self,
            Self::ConfigurationInvalid
                | Self::ProviderUnavailable
                | Self::ProfileInvalid
                | Self::McpUnavailable
                | Self::StartupCancelled
                | Self::StartupFailed
        )
    }
}

/// Why the engine is stopping; decides the exit code together with how draining went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// An explicit `shutdown` request.
    Shutdown,
    /// EOF on input.
    Eof,
    /// `protocol_mismatch` was answered.
    ProtocolMismatch,
    /// `request_limit` was answered.
    RequestLimit,
    /// `frame_too_large` was answered.
    FrameTooLarge,
    /// The oldest output frame missed its deadline.
    OutputDeadline,
    /// Writing output failed.
    OutputBroken,
    /// The output queue would have overflowed (defensive; flow control prevents it).
    QueueOverflow,
}

//! What the protocol promises, restated: the protocol name, the frame bounds and the base
//! capabilities and limits of version 1.
//!
//! These are deliberately independent of `protocol-core`: the tests restate the spec instead of
//! importing the implementation's constants, so a change to an advertised value there fails
//! here until the spec (and this file) agree.

/// The protocol name.
pub const PROTOCOL: &str = "magi-code.local-agent";
/// Input frame bound (bytes, excluding LF).
pub const INPUT_FRAME_BYTES: usize = 65_536;
/// Output frame bound (bytes, including LF).
pub const OUTPUT_FRAME_BYTES: usize = 65_536;

/// The sixteen base capabilities in the order of the protocol's "Implemented" list.
pub const BASE_CAPABILITIES: [&str; 16] = [
    "initialize",
    "status",
    "shutdown",
    "session.create",
    "session.open",
    "session.list",
    "session.discover",
    "model.catalog",
    "model.catalog.status",
    "model.refresh",
    "operation.cancel",
    "selection.set",
    "history.page",
    "turn.start",
    "turn.cancel",
    "approval.answer",
];

/// Every key of the base `limits` object with its version-1 value (decisions.md 9 plus the
/// `discovery_*`, `catalog_*` and `selection_append_bytes` bounds of the protocol).
pub const BASE_LIMITS: [(&str, u64); 46] = [
    ("input_frame_bytes", 65_536),
    ("output_frame_bytes", 65_536),
    ("json_depth", 32),
    ("id_bytes", 64),
    ("prompt_bytes", 16_384),
    ("history_chunk_bytes", 16_384),
    ("live_chunk_bytes", 4_000),
    ("history_page_bytes", 32_768),
    ("history_page_entries", 100),
    ("history_snapshot_bytes", 8_388_608),
    ("history_snapshot_parts", 10_000),
    ("history_read_bytes", 67_108_864),
    ("history_read_lines", 100_000),
    ("pending_output_frames", 32),
    ("worker_events", 32),
    ("critical_event_wait_ms", 2_000),
    ("run_content_bytes", 8_388_608),
    ("run_content_segments", 512),
    ("run_activities", 4_096),
    ("activity_id_bytes", 1_024),
    ("summary_bytes", 1_024),
    ("approval_expiry_ms", 60_000),
    ("request_ids", 4_096),
    ("output_deadline_ms", 2_000),
    ("cleanup_wait_ms", 2_000),
    ("required_capabilities", 16),
    ("discovery_page_bytes", 32_768),
    ("discovery_page_entries", 100),
    ("discovery_directory_entries", 4_096),
    ("discovery_sessions", 256),
    ("discovery_session_bytes", 8_388_608),
    ("discovery_session_lines", 10_000),
    ("discovery_scan_bytes", 67_108_864),
    ("discovery_scan_lines", 100_000),
    ("discovery_scan_ms", 2_000),
    ("discovery_title_bytes", 256),
    ("catalog_page_bytes", 32_768),
    ("catalog_page_entries", 100),
    ("catalog_providers", 32),
    ("catalog_models", 2_048),
    ("catalog_file_bytes", 1_048_576),
    ("catalog_scan_bytes", 8_388_608),
    ("catalog_snapshot_bytes", 1_048_576),
    ("catalog_string_bytes", 256),
    ("catalog_scan_ms", 2_000),
    ("selection_append_bytes", 4_096),
];

//! The bounds of version 1: one table, the single source for enforcement and for the
//! `limits` object of the `initialize` result.

/// Input frame bytes, excluding the LF.
pub const INPUT_FRAME_BYTES: usize = 65_536;
/// Output frame bytes, including the LF.
pub const OUTPUT_FRAME_BYTES: usize = 65_536;
/// JSON nesting: containers on one path, the request object being depth 1.
pub const JSON_DEPTH: usize = 32;
/// Request ID, method and capability names: 1 to this many ASCII bytes.
pub const ID_BYTES: usize = 64;
/// Prompt bytes.
pub const PROMPT_BYTES: usize = 16_384;
/// Pending output frames.
pub const PENDING_OUTPUT_FRAMES: usize = 32;
/// One read batch.
pub const READ_BATCH_BYTES: usize = 4_096;
/// Request IDs retained per child.
pub const REQUEST_IDS: usize = 4_096;
/// Output deadline from enqueue, not reset by partial writes.
pub const OUTPUT_DEADLINE_MS: u64 = 2_000;
/// Closing deadline after EOF.
pub const CLOSING_DEADLINE_MS: u64 = 2_000;
/// Cleanup wait after output draining stops.
pub const CLEANUP_WAIT_MS: u64 = 2_000;
/// Required capability names in `initialize` (18 with `client.tools`).
pub const REQUIRED_CAPABILITIES: usize = 16;
/// Required capability names in `initialize` when `client.tools` is negotiated.
pub const REQUIRED_CAPABILITIES_WITH_CLIENT_TOOLS: usize = 18;
/// Session ID bytes (grammar `[A-Za-z0-9_-]`).
pub const SESSION_ID_BYTES: usize = 64;
/// Provider and model name bytes.
pub const NAME_BYTES: usize = 256;
/// Maximum `limit` of paged requests.
pub const PAGE_LIMIT_MAX: u64 = 100;
/// Default `limit` of paged requests.
pub const PAGE_LIMIT_DEFAULT: u64 = 100;

/// Every advertised bound, in the order and with the key names of `decisions.md` 9.
pub const ADVERTISED: &[(&str, u64)] = &[
    ("input_frame_bytes", INPUT_FRAME_BYTES as u64),
    ("output_frame_bytes", OUTPUT_FRAME_BYTES as u64),
    ("json_depth", JSON_DEPTH as u64),
    ("id_bytes", ID_BYTES as u64),
    ("prompt_bytes", PROMPT_BYTES as u64),
    ("history_chunk_bytes", 16_384),
    ("live_chunk_bytes", 4_000),
    ("history_page_bytes", 32_768),
    ("history_page_entries", 100),
    ("history_snapshot_bytes", 8_388_608),
    ("history_snapshot_parts", 10_000),
    ("history_read_bytes", 67_108_864),
    ("history_read_lines", 100_000),
    ("pending_output_frames", PENDING_OUTPUT_FRAMES as u64),
    ("worker_events", 32),
    ("critical_event_wait_ms", 2_000),
    ("run_content_bytes", 8_388_608),
    ("run_content_segments", 512),
    ("run_activities", 4_096),
    ("activity_id_bytes", 1_024),
    ("summary_bytes", 1_024),
    ("approval_expiry_ms", 60_000),
    ("request_ids", REQUEST_IDS as u64),
    ("output_deadline_ms", OUTPUT_DEADLINE_MS),
    ("cleanup_wait_ms", CLEANUP_WAIT_MS),
    ("required_capabilities", REQUIRED_CAPABILITIES as u64),
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

/// Bounds of the negotiated `session.discover` extension, advertised only when negotiated.
pub const DISCOVER_ADVERTISED: &[(&str, u64)] = &[
    ("discover_page_bytes", 32_768),
    ("discover_page_entries", 100),
    ("discover_candidates", 256),
    ("discover_session_bytes", 8_388_608),
    ("discover_session_lines", 10_000),
    ("discover_scan_bytes", 67_108_864),
    ("discover_scan_lines", 100_000),
    ("discover_scan_ms", 2_000),
    ("discover_title_bytes", 256),
];

/// The value of one advertised bound by its key.
#[must_use]
pub fn advertised(key: &str) -> Option<u64> {
    ADVERTISED.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

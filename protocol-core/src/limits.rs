//! The bounds of version 1: one table, the single source for enforcement and for the
//! `limits` object of the `initialize` result.
//!
//! Types follow the use, not the wire (where every bound is a JSON integer):
//! - `usize` for lengths and counts compared with in-memory sizes (`len()`, entries, lines);
//! - `u64` for byte budgets of files and streams read from disk (compared with
//!   `Metadata::len` and given to `Read::take`), for milliseconds (as [`crate::Time`] and
//!   `Duration::from_millis` take them), and for request `limit` values parsed from JSON.

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

/// Raw UTF-8 bytes of one history text chunk, before the cut for JSON escaping.
pub const HISTORY_CHUNK_BYTES: usize = 16_384;
/// Raw UTF-8 bytes of one live content chunk in a run event.
pub const LIVE_CHUNK_BYTES: usize = 4_000;
/// Serialized bytes of one `history.page` result, metadata included.
pub const HISTORY_PAGE_BYTES: usize = 32_768;
/// Entries of one `history.page` result.
pub const HISTORY_PAGE_ENTRIES: usize = 100;
/// Serialized bytes of the entry projection one history snapshot holds (8 MiB).
pub const HISTORY_SNAPSHOT_BYTES: usize = 8 << 20;
/// Parts one history snapshot holds.
pub const HISTORY_SNAPSHOT_PARTS: usize = 10_000;
/// Original JSONL bytes read from one stored history (64 MiB).
pub const HISTORY_READ_BYTES: u64 = 64 << 20;
/// Lines read from one stored history.
pub const HISTORY_READ_LINES: usize = 100_000;
/// Capacity of the worker event channel; best-effort deltas drop when it is full.
pub const WORKER_EVENTS: usize = 32;
/// How long a critical worker event waits for room in the worker event channel.
pub const CRITICAL_EVENT_WAIT_MS: u64 = 2_000;
/// Assistant content bytes per run (8 MiB).
pub const RUN_CONTENT_BYTES: usize = 8 << 20;
/// Assistant content segments per run.
pub const RUN_CONTENT_SEGMENTS: usize = 512;
/// Activity identities per run.
pub const RUN_ACTIVITIES: usize = 4_096;
/// Bytes of one internal activity ID.
pub const ACTIVITY_ID_BYTES: usize = 1_024;
/// UTF-8 bytes of an activity, approval or diagnostic summary, after redaction.
pub const SUMMARY_BYTES: usize = 1_024;
/// `tool.details`: most lines of a `tool.output` tail.
pub const TOOL_TAIL_LINES: usize = 8;
/// `tool.details`: most bytes of a `tool.output` tail.
pub const TOOL_TAIL_BYTES: usize = 2048;
/// `tool.details`: most bytes of a `tool.diff` diff.
pub const TOOL_DIFF_BYTES: usize = 16_384;
/// `tool.cards`: largest serialized card (not a `limits` key; the extension descriptor says it).
pub const CARD_BYTES: usize = 4_096;
/// `tool.cards`: longest card `title`.
pub const CARD_TITLE_BYTES: usize = 256;
/// Time after which an unanswered approval is denied.
pub const APPROVAL_EXPIRY_MS: u64 = 60_000;

/// Serialized bytes of one `session.list` result, metadata included.
pub const DISCOVERY_PAGE_BYTES: usize = 32_768;
/// Entries of one `session.list` result.
pub const DISCOVERY_PAGE_ENTRIES: usize = 100;
/// Names in the session folder one inventory pass visits (sidecars and locks included).
pub const DISCOVERY_DIRECTORY_ENTRIES: usize = 4_096;
/// Sessions one `session.list` snapshot holds.
pub const DISCOVERY_SESSIONS: usize = 256;
/// Bytes read from one candidate history (8 MiB).
pub const DISCOVERY_SESSION_BYTES: u64 = 8 << 20;
/// Lines read from one candidate history.
pub const DISCOVERY_SESSION_LINES: usize = 10_000;
/// Bytes read from all candidates of one scan (64 MiB).
pub const DISCOVERY_SCAN_BYTES: u64 = 64 << 20;
/// Lines read from all candidates of one scan.
pub const DISCOVERY_SCAN_LINES: usize = 100_000;
/// Cooperative deadline of one scan.
pub const DISCOVERY_SCAN_MS: u64 = 2_000;
/// UTF-8 bytes of one session title.
pub const DISCOVERY_TITLE_BYTES: usize = 256;

/// Serialized bytes of one `model.catalog` result, metadata included.
pub const CATALOG_PAGE_BYTES: usize = 32_768;
/// Entries of one `model.catalog` result.
pub const CATALOG_PAGE_ENTRIES: usize = 100;
/// Providers one catalog admits, the three built-ins included.
pub const CATALOG_PROVIDERS: usize = 32;
/// Models one scan reads, counted before exclusions.
pub const CATALOG_MODELS: usize = 2_048;
/// Bytes of one catalog cache file (1 MiB).
pub const CATALOG_FILE_BYTES: u64 = 1 << 20;
/// Cache bytes read by one scan (8 MiB).
pub const CATALOG_SCAN_BYTES: u64 = 8 << 20;
/// Serialized bytes of the choices one catalog snapshot holds (1 MiB).
pub const CATALOG_SNAPSHOT_BYTES: usize = 1 << 20;
/// Bytes of one catalog string (provider, model, label).
pub const CATALOG_STRING_BYTES: usize = 256;
/// Cooperative deadline of one catalog scan.
pub const CATALOG_SCAN_MS: u64 = 2_000;

/// Serialized bytes of the one `session_preferences` record `selection.set` appends.
pub const SELECTION_APPEND_BYTES: usize = 4_096;

/// Serialized bytes of one `session.discover` result, metadata included.
pub const DISCOVER_PAGE_BYTES: usize = 32_768;
/// Entries of one `session.discover` result.
pub const DISCOVER_PAGE_ENTRIES: usize = 100;
/// Candidates one `session.discover` call validates.
pub const DISCOVER_CANDIDATES: usize = 256;
/// Bytes read from one `session.discover` candidate (8 MiB).
pub const DISCOVER_SESSION_BYTES: u64 = 8 << 20;
/// Lines read from one `session.discover` candidate.
pub const DISCOVER_SESSION_LINES: usize = 10_000;
/// Bytes read from all candidates of one `session.discover` call (64 MiB).
pub const DISCOVER_SCAN_BYTES: u64 = 64 << 20;
/// Lines read from all candidates of one `session.discover` call.
pub const DISCOVER_SCAN_LINES: usize = 100_000;
/// Cooperative deadline of one `session.discover` call.
pub const DISCOVER_SCAN_MS: u64 = 2_000;
/// UTF-8 bytes of one session title in a `session.discover` entry.
pub const DISCOVER_TITLE_BYTES: usize = 256;

/// `client.tools`: most tools one `initialize` may register.
pub const CLIENT_TOOLS: usize = 32;
/// `client.tools`: longest tool name (`[A-Za-z0-9_-]`, what provider tool APIs accept).
pub const CLIENT_TOOL_NAME_BYTES: usize = 64;
/// `client.tools`: longest tool description.
pub const CLIENT_TOOL_DESCRIPTION_BYTES: usize = 1_024;
/// `client.tools`: largest serialized `input_schema`.
pub const CLIENT_TOOL_SCHEMA_BYTES: usize = 16_384;
/// `client.tools`: largest serialized `input` of a `client.tool.call`.
pub const CLIENT_TOOL_INPUT_BYTES: usize = 49_152;
/// `client.tools`: longest `output` of a `client.tool.result`.
pub const CLIENT_TOOL_OUTPUT_BYTES: usize = 49_152;
/// `client.tools`: how long a call waits for its answer before `client.tool.cancel`.
pub const CLIENT_TOOL_TIMEOUT_MS: u64 = 120_000;

/// Every advertised bound, in the order and with the key names of `decisions.md` 9.
pub const ADVERTISED: &[(&str, u64)] = &[
    ("input_frame_bytes", INPUT_FRAME_BYTES as u64),
    ("output_frame_bytes", OUTPUT_FRAME_BYTES as u64),
    ("json_depth", JSON_DEPTH as u64),
    ("id_bytes", ID_BYTES as u64),
    ("prompt_bytes", PROMPT_BYTES as u64),
    ("history_chunk_bytes", HISTORY_CHUNK_BYTES as u64),
    ("live_chunk_bytes", LIVE_CHUNK_BYTES as u64),
    ("history_page_bytes", HISTORY_PAGE_BYTES as u64),
    ("history_page_entries", HISTORY_PAGE_ENTRIES as u64),
    ("history_snapshot_bytes", HISTORY_SNAPSHOT_BYTES as u64),
    ("history_snapshot_parts", HISTORY_SNAPSHOT_PARTS as u64),
    ("history_read_bytes", HISTORY_READ_BYTES),
    ("history_read_lines", HISTORY_READ_LINES as u64),
    ("pending_output_frames", PENDING_OUTPUT_FRAMES as u64),
    ("worker_events", WORKER_EVENTS as u64),
    ("critical_event_wait_ms", CRITICAL_EVENT_WAIT_MS),
    ("run_content_bytes", RUN_CONTENT_BYTES as u64),
    ("run_content_segments", RUN_CONTENT_SEGMENTS as u64),
    ("run_activities", RUN_ACTIVITIES as u64),
    ("activity_id_bytes", ACTIVITY_ID_BYTES as u64),
    ("summary_bytes", SUMMARY_BYTES as u64),
    ("approval_expiry_ms", APPROVAL_EXPIRY_MS),
    ("request_ids", REQUEST_IDS as u64),
    ("output_deadline_ms", OUTPUT_DEADLINE_MS),
    ("cleanup_wait_ms", CLEANUP_WAIT_MS),
    ("required_capabilities", REQUIRED_CAPABILITIES as u64),
    ("discovery_page_bytes", DISCOVERY_PAGE_BYTES as u64),
    ("discovery_page_entries", DISCOVERY_PAGE_ENTRIES as u64),
    (
        "discovery_directory_entries",
        DISCOVERY_DIRECTORY_ENTRIES as u64,
    ),
    ("discovery_sessions", DISCOVERY_SESSIONS as u64),
    ("discovery_session_bytes", DISCOVERY_SESSION_BYTES),
    ("discovery_session_lines", DISCOVERY_SESSION_LINES as u64),
    ("discovery_scan_bytes", DISCOVERY_SCAN_BYTES),
    ("discovery_scan_lines", DISCOVERY_SCAN_LINES as u64),
    ("discovery_scan_ms", DISCOVERY_SCAN_MS),
    ("discovery_title_bytes", DISCOVERY_TITLE_BYTES as u64),
    ("catalog_page_bytes", CATALOG_PAGE_BYTES as u64),
    ("catalog_page_entries", CATALOG_PAGE_ENTRIES as u64),
    ("catalog_providers", CATALOG_PROVIDERS as u64),
    ("catalog_models", CATALOG_MODELS as u64),
    ("catalog_file_bytes", CATALOG_FILE_BYTES),
    ("catalog_scan_bytes", CATALOG_SCAN_BYTES),
    ("catalog_snapshot_bytes", CATALOG_SNAPSHOT_BYTES as u64),
    ("catalog_string_bytes", CATALOG_STRING_BYTES as u64),
    ("catalog_scan_ms", CATALOG_SCAN_MS),
    ("selection_append_bytes", SELECTION_APPEND_BYTES as u64),
];

/// Bounds of the negotiated `session.discover` extension, advertised only when negotiated.
pub const DISCOVER_ADVERTISED: &[(&str, u64)] = &[
    ("discover_page_bytes", DISCOVER_PAGE_BYTES as u64),
    ("discover_page_entries", DISCOVER_PAGE_ENTRIES as u64),
    ("discover_candidates", DISCOVER_CANDIDATES as u64),
    ("discover_session_bytes", DISCOVER_SESSION_BYTES),
    ("discover_session_lines", DISCOVER_SESSION_LINES as u64),
    ("discover_scan_bytes", DISCOVER_SCAN_BYTES),
    ("discover_scan_lines", DISCOVER_SCAN_LINES as u64),
    ("discover_scan_ms", DISCOVER_SCAN_MS),
    ("discover_title_bytes", DISCOVER_TITLE_BYTES as u64),
];

/// Bounds of the negotiated `client.tools` extension, advertised only when negotiated.
pub const CLIENT_TOOLS_ADVERTISED: &[(&str, u64)] = &[
    ("client_tools", CLIENT_TOOLS as u64),
    ("client_tool_input_bytes", CLIENT_TOOL_INPUT_BYTES as u64),
    ("client_tool_output_bytes", CLIENT_TOOL_OUTPUT_BYTES as u64),
    ("client_tool_timeout_ms", CLIENT_TOOL_TIMEOUT_MS),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The wire values of `decisions.md` 9 and the protocol's bound tables, written out by
    /// hand so that a constant changed by mistake fails here rather than on a client.
    const SPEC: &[(&str, u64)] = &[
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

    const DISCOVER_SPEC: &[(&str, u64)] = &[
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

    /// The constant behind each key is the one whose name is the key in upper case.
    fn by_name(key: &str) -> Option<u64> {
        let v = match key.to_ascii_uppercase().as_str() {
            "INPUT_FRAME_BYTES" => INPUT_FRAME_BYTES as u64,
            "OUTPUT_FRAME_BYTES" => OUTPUT_FRAME_BYTES as u64,
            "JSON_DEPTH" => JSON_DEPTH as u64,
            "ID_BYTES" => ID_BYTES as u64,
            "PROMPT_BYTES" => PROMPT_BYTES as u64,
            "HISTORY_CHUNK_BYTES" => HISTORY_CHUNK_BYTES as u64,
            "LIVE_CHUNK_BYTES" => LIVE_CHUNK_BYTES as u64,
            "HISTORY_PAGE_BYTES" => HISTORY_PAGE_BYTES as u64,
            "HISTORY_PAGE_ENTRIES" => HISTORY_PAGE_ENTRIES as u64,
            "HISTORY_SNAPSHOT_BYTES" => HISTORY_SNAPSHOT_BYTES as u64,
            "HISTORY_SNAPSHOT_PARTS" => HISTORY_SNAPSHOT_PARTS as u64,
            "HISTORY_READ_BYTES" => HISTORY_READ_BYTES,
            "HISTORY_READ_LINES" => HISTORY_READ_LINES as u64,
            "PENDING_OUTPUT_FRAMES" => PENDING_OUTPUT_FRAMES as u64,
            "WORKER_EVENTS" => WORKER_EVENTS as u64,
            "CRITICAL_EVENT_WAIT_MS" => CRITICAL_EVENT_WAIT_MS,
            "RUN_CONTENT_BYTES" => RUN_CONTENT_BYTES as u64,
            "RUN_CONTENT_SEGMENTS" => RUN_CONTENT_SEGMENTS as u64,
            "RUN_ACTIVITIES" => RUN_ACTIVITIES as u64,
            "ACTIVITY_ID_BYTES" => ACTIVITY_ID_BYTES as u64,
            "SUMMARY_BYTES" => SUMMARY_BYTES as u64,
            "APPROVAL_EXPIRY_MS" => APPROVAL_EXPIRY_MS,
            "REQUEST_IDS" => REQUEST_IDS as u64,
            "OUTPUT_DEADLINE_MS" => OUTPUT_DEADLINE_MS,
            "CLEANUP_WAIT_MS" => CLEANUP_WAIT_MS,
            "REQUIRED_CAPABILITIES" => REQUIRED_CAPABILITIES as u64,
            "DISCOVERY_PAGE_BYTES" => DISCOVERY_PAGE_BYTES as u64,
            "DISCOVERY_PAGE_ENTRIES" => DISCOVERY_PAGE_ENTRIES as u64,
            "DISCOVERY_DIRECTORY_ENTRIES" => DISCOVERY_DIRECTORY_ENTRIES as u64,
            "DISCOVERY_SESSIONS" => DISCOVERY_SESSIONS as u64,
            "DISCOVERY_SESSION_BYTES" => DISCOVERY_SESSION_BYTES,
            "DISCOVERY_SESSION_LINES" => DISCOVERY_SESSION_LINES as u64,
            "DISCOVERY_SCAN_BYTES" => DISCOVERY_SCAN_BYTES,
            "DISCOVERY_SCAN_LINES" => DISCOVERY_SCAN_LINES as u64,
            "DISCOVERY_SCAN_MS" => DISCOVERY_SCAN_MS,
            "DISCOVERY_TITLE_BYTES" => DISCOVERY_TITLE_BYTES as u64,
            "CATALOG_PAGE_BYTES" => CATALOG_PAGE_BYTES as u64,
            "CATALOG_PAGE_ENTRIES" => CATALOG_PAGE_ENTRIES as u64,
            "CATALOG_PROVIDERS" => CATALOG_PROVIDERS as u64,
            "CATALOG_MODELS" => CATALOG_MODELS as u64,
            "CATALOG_FILE_BYTES" => CATALOG_FILE_BYTES,
            "CATALOG_SCAN_BYTES" => CATALOG_SCAN_BYTES,
            "CATALOG_SNAPSHOT_BYTES" => CATALOG_SNAPSHOT_BYTES as u64,
            "CATALOG_STRING_BYTES" => CATALOG_STRING_BYTES as u64,
            "CATALOG_SCAN_MS" => CATALOG_SCAN_MS,
            "SELECTION_APPEND_BYTES" => SELECTION_APPEND_BYTES as u64,
            "DISCOVER_PAGE_BYTES" => DISCOVER_PAGE_BYTES as u64,
            "DISCOVER_PAGE_ENTRIES" => DISCOVER_PAGE_ENTRIES as u64,
            "DISCOVER_CANDIDATES" => DISCOVER_CANDIDATES as u64,
            "DISCOVER_SESSION_BYTES" => DISCOVER_SESSION_BYTES,
            "DISCOVER_SESSION_LINES" => DISCOVER_SESSION_LINES as u64,
            "DISCOVER_SCAN_BYTES" => DISCOVER_SCAN_BYTES,
            "DISCOVER_SCAN_LINES" => DISCOVER_SCAN_LINES as u64,
            "DISCOVER_SCAN_MS" => DISCOVER_SCAN_MS,
            "DISCOVER_TITLE_BYTES" => DISCOVER_TITLE_BYTES as u64,
            "CLIENT_TOOLS" => CLIENT_TOOLS as u64,
            "CLIENT_TOOL_INPUT_BYTES" => CLIENT_TOOL_INPUT_BYTES as u64,
            "CLIENT_TOOL_OUTPUT_BYTES" => CLIENT_TOOL_OUTPUT_BYTES as u64,
            "CLIENT_TOOL_TIMEOUT_MS" => CLIENT_TOOL_TIMEOUT_MS,
            _ => return None,
        };
        Some(v)
    }

    #[test]
    fn advertised_keys_are_unique_across_both_tables() {
        let mut seen = HashSet::new();
        for (k, _) in ADVERTISED
            .iter()
            .chain(DISCOVER_ADVERTISED)
            .chain(CLIENT_TOOLS_ADVERTISED)
        {
            assert!(seen.insert(*k), "duplicate key {k}");
        }
    }

    #[test]
    fn advertised_tables_match_the_spec_and_the_constants() {
        assert_eq!(ADVERTISED, SPEC);
        assert_eq!(DISCOVER_ADVERTISED, DISCOVER_SPEC);
        // `extensions.md` "client.tools", written out by hand.
        assert_eq!(
            CLIENT_TOOLS_ADVERTISED,
            &[
                ("client_tools", 32),
                ("client_tool_input_bytes", 49_152),
                ("client_tool_output_bytes", 49_152),
                ("client_tool_timeout_ms", 120_000),
            ]
        );
        for (k, v) in ADVERTISED
            .iter()
            .chain(DISCOVER_ADVERTISED)
            .chain(CLIENT_TOOLS_ADVERTISED)
        {
            assert_eq!(by_name(k), Some(*v), "{k} is not its constant");
        }
    }
}

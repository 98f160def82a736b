//! In-process tests of the backend's domain code (no spawned server on the path under test),
//! run against temporary directories.

mod append_path;

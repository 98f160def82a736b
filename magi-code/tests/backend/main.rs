//! In-process tests of the backend's domain code, run against temporary directories, and the
//! tidy test of `src`'s layout.

mod append_path;
mod fuzz_corpus;
mod incremental;
mod layering;

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| magi_code::acp::rpc::fuzz(data));

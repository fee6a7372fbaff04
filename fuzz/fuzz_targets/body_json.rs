//! libFuzzer entry point of the `body_json` target; the body is `palisade_fuzz::body::fuzz_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::body::fuzz_json(data));

//! libFuzzer entry point of the `body_urlencoded` target; the body is `palisade_fuzz::body::fuzz_urlencoded`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::body::fuzz_urlencoded(data));

//! libFuzzer entry point of the `http1_head` target; the body is `palisade_fuzz::http1::fuzz_http1_head`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::http1::fuzz_http1_head(data));

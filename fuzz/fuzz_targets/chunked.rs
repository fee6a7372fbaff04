//! libFuzzer entry point of the `chunked` target; the body is `palisade_fuzz::http1::fuzz_chunked`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::http1::fuzz_chunked(data));

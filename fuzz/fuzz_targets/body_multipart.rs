//! libFuzzer entry point of the `body_multipart` target; the body is `palisade_fuzz::body::fuzz_multipart`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::body::fuzz_multipart(data));

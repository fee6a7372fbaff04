//! libFuzzer entry point of the `http1_httparse_diff` target; the body is `palisade_fuzz::http1::fuzz_http1_httparse_diff`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::http1::fuzz_http1_httparse_diff(data));

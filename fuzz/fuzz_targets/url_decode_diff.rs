//! libFuzzer entry point of the `url_decode_diff` target; the body is `palisade_fuzz::url_decode::fuzz_url_decode_diff`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::url_decode::fuzz_url_decode_diff(data));

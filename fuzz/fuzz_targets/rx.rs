//! libFuzzer entry point of the `rx` target; the body is `palisade_fuzz::rx::fuzz_rx`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::rx::fuzz_rx(data));

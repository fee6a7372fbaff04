//! libFuzzer entry point of the `injection` target; the body is `palisade_fuzz::injection::fuzz_injection`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::injection::fuzz_injection(data));

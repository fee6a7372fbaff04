//! libFuzzer entry point of the `seclang` target; the body is `palisade_fuzz::rules::fuzz_seclang`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::rules::fuzz_seclang(data));

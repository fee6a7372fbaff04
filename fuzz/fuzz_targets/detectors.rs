//! libFuzzer entry point of the `detectors` target; the body is `palisade_fuzz::detectors::fuzz_detectors`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::detectors::fuzz_detectors(data));

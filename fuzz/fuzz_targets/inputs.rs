//! libFuzzer entry point of the `inputs` target; the body is `palisade_fuzz::detectors::fuzz_inputs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::detectors::fuzz_inputs(data));

//! libFuzzer entry point of the `transforms` target; the body is `palisade_fuzz::transforms::fuzz_transforms`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::transforms::fuzz_transforms(data));

//! libFuzzer entry point of the `body_xml` target; the body is `palisade_fuzz::body::fuzz_xml`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::body::fuzz_xml(data));

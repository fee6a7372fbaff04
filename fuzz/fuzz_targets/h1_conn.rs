//! libFuzzer entry point of the `h1_conn` target; the body is `palisade_fuzz::conn::fuzz_h1_conn`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::conn::fuzz_h1_conn(data));

//! libFuzzer entry point of the `client_address` target; the body is `palisade_fuzz::client_address::fuzz_client_address`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_fuzz::client_address::fuzz_client_address(data));

#![no_main]
//! libFuzzer entry point; the invariants are in memcrab-fuzz-checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| memcrab_fuzz_checks::tls(data));

//! Create/update bodies in JSON and YAML, fed by libFuzzer; what is checked of each input lives in
//! `skiff_fuzz_checks::body` (whose test replays the committed corpus).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz_checks::body::run(data));

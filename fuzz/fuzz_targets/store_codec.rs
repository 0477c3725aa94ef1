//! The store's on-disk codec, fed by libFuzzer; what is checked of each input lives in
//! `skiff_fuzz_checks::store_codec` (whose test replays the committed corpus).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz_checks::store_codec::run(data));

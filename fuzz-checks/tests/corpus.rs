//! Replays every committed fuzz input (`fuzz/corpus/<target>/`) through the
//! checks its target makes, so an input that once found a bug, or seeds a
//! kind of body worth keeping, is checked on every test run without the
//! nightly fuzzing build. A failure names the file to hand to
//! `scripts/fuzz`'s target for the full libFuzzer report.

use std::path::{Path, PathBuf};

type Check = fn(&[u8]);

const TARGETS: [(&str, Check); 8] = [
    ("apply", skiff_fuzz_checks::apply::run),
    ("body", skiff_fuzz_checks::body::run),
    ("managed_fields", skiff_fuzz_checks::managed_fields::run),
    ("patch", skiff_fuzz_checks::patch::run),
    ("protobuf", skiff_fuzz_checks::protobuf::run),
    ("quantity", skiff_fuzz_checks::quantity::run),
    ("selectors", skiff_fuzz_checks::selectors::run),
    ("store_codec", skiff_fuzz_checks::store_codec::run),
];

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_target_has_a_corpus_and_its_inputs_pass_the_checks() {
    let mut failed = Vec::new();
    for (target, check) in TARGETS {
        let files = corpus(target);
        assert!(!files.is_empty(), "fuzz/corpus/{target} holds no input");
        for file in files {
            let data = std::fs::read(&file).expect("a readable corpus file");
            if std::panic::catch_unwind(|| check(&data)).is_err() {
                failed.push(file.display().to_string());
            }
        }
    }
    assert!(failed.is_empty(), "inputs failing their checks: {failed:?}");
}

#[test]
fn every_fuzz_target_is_replayed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/fuzz_targets");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| {
            let name = entry.expect("a fuzz_targets entry").file_name();
            Some(name.to_str()?.strip_suffix(".rs")?.to_string())
        })
        .collect();
    on_disk.sort();
    let replayed: Vec<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    assert_eq!(on_disk, replayed);
}

//! `skiff server` and `skiff agent` flags from a YAML file, as k3s reads
//! `/etc/rancher/k3s/config.yaml`: each key is a long flag without its
//! dashes (`node-label`, `tls-san`), a list is a repeated flag, `true` sets
//! a switch and `false` leaves it off. The file is `--config FILE` (`-c`,
//! `SKIFF_CONFIG_FILE`), else `/etc/skiff/config.yaml` when it exists.
//!
//! What the command line or the flag's `SKIFF_*` variable sets wins, a
//! repeatable flag included: given there, the file's list for it is not
//! used at all (k3s's rule). The file's values become ordinary arguments
//! ahead of the command line's, so clap checks them like any other.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where the file is looked for when no `--config` names one.
pub(crate) const DEFAULT_PATH: &str = "/etc/skiff/config.yaml";
/// The variable that names the file, as `--config` does.
const ENV: &str = "SKIFF_CONFIG_FILE";

/// Why the configuration file is not used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigFileError {
    /// It could not be read.
    #[error("reading the configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is not YAML.
    #[error("the configuration file {path} is not YAML: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's words.
        source: serde_yaml::Error,
    },
    /// It is YAML of another shape.
    #[error("the configuration file {path}: {what}")]
    Shape {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        what: String,
    },
}

/// `args` (the process's, program name first) with the flags of the
/// configuration file and its drop-ins put in after the subcommand, for
/// `server` and `agent`; the file named, if any was read.
pub(crate) fn with_file_flags(
    args: Vec<OsString>,
    env: impl Fn(&str) -> Option<String>,
    is_switch: impl Fn(&str, &str) -> bool,
) -> Result<(Vec<OsString>, Option<PathBuf>), ConfigFileError> {
    let Some(command) = args.get(1).and_then(|a| a.to_str()) else {
        return Ok((args, None));
    };
    if command != "server" && command != "agent" {
        return Ok((args, None));
    }
    let given: Vec<&str> = args[2..].iter().filter_map(|a| a.to_str()).collect();
    let (path, explicit) = match named_file(&given).or_else(|| env(ENV)) {
        Some(path) => (PathBuf::from(path), true),
        None => (PathBuf::from(DEFAULT_PATH), false),
    };
    let mut files = Vec::new();
    match std::fs::read_to_string(&path) {
        Ok(text) => files.push((path.clone(), text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {}
        Err(source) => return Err(ConfigFileError::Read { path, source }),
    }
    files.extend(drop_ins(&path)?);
    if files.is_empty() {
        return Ok((args, None));
    }
    let mut merged: Vec<(String, Vec<String>)> = Vec::new();
    for (file, text) in &files {
        for (key, append, values) in file_keys(file, text, |key| is_switch(command, key))? {
            match merged.iter_mut().find(|(k, _)| *k == key) {
                Some((_, old)) if append => old.extend(values),
                Some((_, old)) => *old = values,
                None => merged.push((key, values)),
            }
        }
    }
    let flags = merged
        .into_iter()
        .filter(|(key, _)| !set_elsewhere(key, &given, &env))
        .flat_map(|(_, values)| values);
    let mut out = args[..2].to_vec();
    out.extend(flags.map(OsString::from));
    out.extend(args[2..].iter().cloned());
    Ok((out, Some(path)))
}

/// The drop-ins beside `path` (`config.yaml.d/*.yaml`, k3s's), by name.
fn drop_ins(path: &Path) -> Result<Vec<(PathBuf, String)>, ConfigFileError> {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".d");
    let dir = PathBuf::from(dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(ConfigFileError::Read { path: dir, source }),
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| match std::fs::read_to_string(&path) {
            Ok(text) => Ok((path, text)),
            Err(source) => Err(ConfigFileError::Read { path, source }),
        })
        .collect()
}

/// The file `--config`/`-c` names on the command line.
fn named_file(given: &[&str]) -> Option<String> {
    let mut args = given.iter();
    while let Some(arg) = args.next() {
        if *arg == "--config" || *arg == "-c" {
            return args.next().map(|s| s.to_string());
        }
        if let Some(path) = arg.strip_prefix("--config=") {
            return Some(path.to_string());
        }
    }
    None
}

/// Whether the command line or the environment sets flag `key`.
fn set_elsewhere(key: &str, given: &[&str], env: &impl Fn(&str) -> Option<String>) -> bool {
    let flag = format!("--{key}");
    let on_command_line = given
        .iter()
        .any(|a| *a == flag || a.strip_prefix(&flag).is_some_and(|r| r.starts_with('=')));
    let variable = format!("SKIFF_{}", key.to_uppercase().replace('-', "_"));
    on_command_line || env(&variable).is_some()
}

/// One file's keys: the flag name, whether it appends (`key+:`), and its
/// values as `--key=value` arguments. A switch (a flag that takes no
/// value) is given for `true` and left out for `false`; any other flag
/// gets a boolean as its value (`--cgroups-per-qos=false`).
fn file_keys(
    path: &Path,
    text: &str,
    is_switch: impl Fn(&str) -> bool,
) -> Result<Vec<(String, bool, Vec<String>)>, ConfigFileError> {
    let shape = |what: String| ConfigFileError::Shape {
        path: path.to_path_buf(),
        what,
    };
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let value: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|source| ConfigFileError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
    let serde_yaml::Value::Mapping(map) = value else {
        return Err(shape(
            "want a mapping of flag names to values, such as `node-label: [a=b]`".into(),
        ));
    };
    let mut keys = Vec::new();
    for (key, value) in map {
        let Some(written) = key.as_str().map(str::to_string) else {
            return Err(shape(format!("key {key:?} is not a flag name")));
        };
        let (key, append) = match written.strip_suffix('+') {
            Some(key) => (key.to_string(), true),
            None => (written.clone(), false),
        };
        if key == "config" || key.starts_with('-') || key.is_empty() {
            return Err(shape(format!(
                "{written:?}: name flags without their dashes, and not `config`"
            )));
        }
        let items = match value {
            serde_yaml::Value::Sequence(items) => items,
            one => vec![one],
        };
        let switch = is_switch(&key);
        let mut flags = Vec::new();
        for item in items {
            match item {
                serde_yaml::Value::Bool(true) if switch => flags.push(format!("--{key}")),
                serde_yaml::Value::Bool(false) if switch => {}
                serde_yaml::Value::Bool(b) => flags.push(format!("--{key}={b}")),
                serde_yaml::Value::Null => {}
                serde_yaml::Value::String(s) => flags.push(format!("--{key}={s}")),
                serde_yaml::Value::Number(n) => flags.push(format!("--{key}={n}")),
                other => {
                    return Err(shape(format!(
                        "{key}: {other:?} is not a string, number, boolean or list of them"
                    )));
                }
            }
        }
        keys.push((key, append, flags));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn strings(list: &[OsString]) -> Vec<String> {
        list.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The test's switches (flags without a value).
    fn switches(_command: &str, key: &str) -> bool {
        key.starts_with("disable-")
    }

    const FILE: &str = "\
node-label:
  - zone=edge
  - tier=1
node-external-ip: 192.0.2.10
max-pods: 50
disable-kube-proxy: true
disable-network-policy: false
cgroups-per-qos: false
";

    fn write(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, text).expect("write");
        let path = path.to_string_lossy().into_owned();
        (dir, path)
    }

    #[test]
    fn file_keys_become_flags_and_the_command_line_wins() {
        let (_dir, path) = write(FILE);
        let (out, used) = with_file_flags(
            args(&["skiff", "agent", "--config", &path, "--max-pods", "20"]),
            |_| None,
            switches,
        )
        .expect("read");
        assert_eq!(used.as_deref(), Some(Path::new(&path)));
        assert_eq!(
            strings(&out),
            [
                "skiff",
                "agent",
                "--node-label=zone=edge",
                "--node-label=tier=1",
                "--node-external-ip=192.0.2.10",
                "--disable-kube-proxy",
                "--cgroups-per-qos=false",
                "--config",
                &path,
                "--max-pods",
                "20",
            ]
        );

        // A repeatable flag on the command line replaces the file's list;
        // a variable counts as the command line.
        let (out, _) = with_file_flags(
            args(&["skiff", "server", "-c", &path, "--node-label=only=cli"]),
            |name| (name == "SKIFF_MAX_PODS").then(|| "30".to_string()),
            switches,
        )
        .expect("read");
        let out = strings(&out);
        assert!(!out.iter().any(|a| a.contains("zone=edge")), "{out:?}");
        assert!(!out.iter().any(|a| a.starts_with("--max-pods")), "{out:?}");
        assert!(out.contains(&"--disable-kube-proxy".to_string()), "{out:?}");
    }

    #[test]
    fn the_file_is_named_by_flag_or_variable_and_other_commands_ignore_it() {
        let (_dir, path) = write("max-pods: 7\n");
        let (out, used) = with_file_flags(
            args(&["skiff", "server"]),
            |name| (name == ENV).then(|| path.clone()),
            switches,
        )
        .expect("read");
        assert!(used.is_some());
        assert_eq!(strings(&out)[2], "--max-pods=7");
        let (out, used) = with_file_flags(
            args(&["skiff", "images", "--config", &path, "list"]),
            |_| None,
            switches,
        )
        .expect("untouched");
        assert_eq!(used, None);
        assert_eq!(out.len(), 5);
    }

    #[test]
    fn drop_ins_follow_by_name_replacing_or_appending() {
        let (dir, path) = write("node-label: [a=1]\nmax-pods: 10\n");
        let drop_ins = dir.path().join("config.yaml.d");
        std::fs::create_dir(&drop_ins).expect("dir");
        std::fs::write(drop_ins.join("20-more.yaml"), "node-label+: [c=3]\n").expect("20");
        std::fs::write(
            drop_ins.join("10-site.yaml"),
            "node-label+: [b=2]\nmax-pods: 20\n",
        )
        .expect("10");
        std::fs::write(drop_ins.join("notes.txt"), "not: read\n").expect("txt");
        let (out, _) = with_file_flags(args(&["skiff", "agent", "-c", &path]), |_| None, switches)
            .expect("read");
        assert_eq!(
            strings(&out)[2..6],
            [
                "--node-label=a=1",
                "--node-label=b=2",
                "--node-label=c=3",
                "--max-pods=20"
            ]
        );
        std::fs::write(drop_ins.join("30-reset.yaml"), "node-label: [z=9]\n").expect("30");
        let (out, _) = with_file_flags(args(&["skiff", "agent", "-c", &path]), |_| None, switches)
            .expect("read");
        assert_eq!(strings(&out)[2..4], ["--node-label=z=9", "--max-pods=20"]);
    }

    #[test]
    fn a_named_file_must_exist_and_hold_flags() {
        let missing = with_file_flags(
            args(&["skiff", "server", "--config=/nonexistent/skiff.yaml"]),
            |_| None,
            switches,
        );
        assert!(
            matches!(missing, Err(ConfigFileError::Read { .. })),
            "{missing:?}"
        );
        for (text, says) in [
            ("- a\n- b\n", "want a mapping"),
            ("node-label: {a: b}\n", "is not a string, number, boolean"),
            ("--max-pods: 3\n", "without their dashes"),
            ("config: /x\n", "without their dashes"),
            ("max-pods: [1\n", "is not YAML"),
        ] {
            let (_dir, path) = write(text);
            let error = with_file_flags(args(&["skiff", "agent", "-c", &path]), |_| None, switches)
                .expect_err(text)
                .to_string();
            assert!(error.contains(says), "{text}: {error}");
            assert!(error.contains(&path), "{error}");
        }
    }
}

//! `scripts/install` into a DESTDIR: the binary, `skiff.service` for a
//! server, `skiff-agent.service` with its credentials in a private env file
//! for an agent, nothing at all with `--dry-run`, and no systemctl call.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use super::support::assert_contains;

fn install(dest: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install");
    Command::new("bash")
        .arg(script)
        .args(args)
        .env("SKIFF_BIN", env!("CARGO_BIN_EXE_skiff"))
        .env("DESTDIR", dest)
        .env_remove("SKIFF_URL")
        .env_remove("SKIFF_TOKEN")
        .env_remove("SKIFF_CA_FILE")
        .envs(env.iter().copied())
        .output()
        .expect("run scripts/install")
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The error output of an install that must have been refused.
fn refused(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// The server URL every agent install here joins.
const URL: (&str, &str) = ("SKIFF_URL", "https://10.0.0.1:6443");

/// An agent install's settings: the URL, a plain token and the CA file
/// such a token needs.
const AGENT: [(&str, &str); 3] = [
    URL,
    ("SKIFF_TOKEN", "s3cret-token"),
    ("SKIFF_CA_FILE", "/etc/skiff/ca.crt"),
];

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn install_writes_the_binary_and_a_server_unit() {
    let dest = tempfile::tempdir().expect("temp dir");
    let out = ok(&install(
        dest.path(),
        &[("INSTALL_SKIFF_EXEC", "--disable-agent")],
        &[],
    ));
    assert_contains(&out, "not starting skiff.service");
    let bin = dest.path().join("usr/local/bin/skiff");
    assert_eq!(mode(&bin), 0o755);
    let version = Command::new(&bin).arg("version").output().expect("run it");
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("skiff "));
    let unit_path = dest.path().join("etc/systemd/system/skiff.service");
    let unit = std::fs::read_to_string(&unit_path).expect("unit");
    // Paths in the unit are where the files end up, without DESTDIR.
    assert_contains(
        &unit,
        "\nExecStart=/usr/local/bin/skiff server --disable-agent\n",
    );
    assert_contains(&unit, "\nKillMode=process\n");
    assert_contains(&unit, "\nWantedBy=multi-user.target\n");
    assert!(
        !dest
            .path()
            .join("etc/systemd/system/skiff-agent.service")
            .exists()
    );

    // A re-install keeps the administrator's settings in the env file.
    let env = dest.path().join("etc/systemd/system/skiff.service.env");
    std::fs::write(&env, "SKIFF_TLS_SAN=edge.example\n").expect("edit env");
    ok(&install(dest.path(), &[], &[]));
    assert_eq!(
        std::fs::read_to_string(&env).expect("env"),
        "SKIFF_TLS_SAN=edge.example\n"
    );
}

#[test]
fn install_with_a_server_url_writes_an_agent_unit_and_private_credentials() {
    let dest = tempfile::tempdir().expect("temp dir");
    let out = ok(&install(
        dest.path(),
        &[&AGENT[..], &[("INSTALL_SKIFF_BIN_DIR", "/opt/skiff/bin")]].concat(),
        &[],
    ));
    assert!(!out.contains("s3cret-token"), "{out}");
    let units = dest.path().join("etc/systemd/system");
    let unit = std::fs::read_to_string(units.join("skiff-agent.service")).expect("unit");
    assert_contains(&unit, "\nExecStart=/opt/skiff/bin/skiff agent\n");
    assert!(!unit.contains("s3cret-token"), "{unit}");
    let env_path = units.join("skiff-agent.service.env");
    assert_eq!(mode(&env_path), 0o600);
    let env = std::fs::read_to_string(&env_path).expect("env");
    assert_contains(&env, "SKIFF_SERVER=https://10.0.0.1:6443\n");
    assert_contains(&env, "SKIFF_TOKEN=s3cret-token\n");
    assert_contains(&env, "SKIFF_CA_FILE=/etc/skiff/ca.crt\n");
    assert!(dest.path().join("opt/skiff/bin/skiff").exists());
    assert!(!units.join("skiff.service").exists());

    // A URL without a token is refused before anything is written.
    let empty = tempfile::tempdir().expect("temp dir");
    let err = refused(&install(empty.path(), &[URL], &[]));
    assert_contains(&err, "SKIFF_TOKEN");
    assert_eq!(std::fs::read_dir(empty.path()).expect("dir").count(), 0);

    // A K10 join token carries the CA's hash: no CA file needed; a plain
    // token without one is refused.
    let joined = tempfile::tempdir().expect("temp dir");
    let k10 = format!("K10{}::server:s3cret", "a".repeat(64));
    ok(&install(
        joined.path(),
        &[URL, ("SKIFF_TOKEN", k10.as_str())],
        &[],
    ));
    let env = std::fs::read_to_string(
        joined
            .path()
            .join("etc/systemd/system/skiff-agent.service.env"),
    )
    .expect("env");
    assert_contains(&env, &format!("SKIFF_TOKEN={k10}\n"));
    assert!(!env.contains("SKIFF_CA_FILE"), "{env}");
    let plain = tempfile::tempdir().expect("temp dir");
    let err = refused(&install(
        plain.path(),
        &[URL, ("SKIFF_TOKEN", "plain")],
        &[],
    ));
    assert_contains(&err, "SKIFF_CA_FILE");
}

#[test]
fn install_dry_run_shows_the_unit_and_writes_nothing() {
    let dest = tempfile::tempdir().expect("temp dir");
    let out = ok(&install(dest.path(), &AGENT, &["--dry-run"]));
    assert_contains(&out, "ExecStart=/usr/local/bin/skiff agent");
    assert_contains(&out, "SKIFF_TOKEN=<hidden>");
    assert!(!out.contains("s3cret-token"), "{out}");
    assert_eq!(std::fs::read_dir(dest.path()).expect("dir").count(), 0);
}

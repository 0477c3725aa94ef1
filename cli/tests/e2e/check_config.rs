//! `skiff check-config` on this machine: every required item passes when
//! the ports are free (a vxlan link can be made for the default backend),
//! and a port someone listens on fails the check by name.

use std::net::TcpListener;
use std::process::{Command, Output};

use super::support::{assert_contains, free_port};

fn check_config(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skiff"))
        .arg("check-config")
        .args(args)
        .output()
        .expect("run skiff check-config")
}

/// Ports nobody uses, so other servers running tests here do not matter.
fn free_ports() -> Vec<String> {
    vec![
        "--https-listen-port".into(),
        free_port().to_string(),
        "--kubelet-port".into(),
        free_port().to_string(),
        "--cluster-dns-listen".into(),
        format!("127.0.0.1:{}", free_port()),
        "--ingress-http-port".into(),
        free_port().to_string(),
        "--ingress-https-port".into(),
        free_port().to_string(),
    ]
}

#[test]
fn check_config_passes_on_this_machine() {
    let args = free_ports();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = check_config(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for item in [
        "kernel: overlay",
        "kernel: br_netfilter",
        "kernel: nf_tables",
        "kernel: cgroups",
        "binary: containerd",
        "binary: runc",
        "CNI plugin: bridge",
        // The default vxlan backend: the module, and a link really made.
        "kernel: vxlan",
        "network: vxlan link",
    ] {
        assert!(
            stdout.contains(&format!("pass  {item}:")),
            "{item}:\n{stdout}"
        );
    }
    assert!(!stdout.contains("FAIL"), "{stdout}");
    assert!(stdout.ends_with("all required checks passed\n"), "{stdout}");
}

/// With the host-gw backend no vxlan device is made, so none is tried and
/// the vxlan module is only advice.
#[test]
fn the_vxlan_link_is_checked_for_the_vxlan_backend_only() {
    let mut args = free_ports();
    args.extend(["--flannel-backend".to_string(), "host-gw".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = check_config(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(!stdout.contains("vxlan link"), "{stdout}");
    assert_contains(&stdout, "kernel: vxlan:");
}

#[test]
fn a_taken_port_fails_the_check_and_is_named() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = taken.local_addr().expect("address").port().to_string();
    let mut args = free_ports();
    args[1] = port.clone();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = check_config(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_contains(
        &stdout,
        &format!("FAIL  port {port}/tcp (API server): in use"),
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1 required check(s) failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

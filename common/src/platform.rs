//! The platform this binary runs on, in Go's spelling, which is how
//! Kubernetes names it everywhere a client reads it: the
//! `kubernetes.io/arch` node label, `nodeInfo.architecture` and the API
//! server's `/version` `platform`.

/// The architecture as Go's `GOARCH` names it (`amd64`, `arm64`, `386`, …).
pub fn go_arch() -> &'static str {
    arch_in_go(std::env::consts::ARCH)
}

/// `os/arch` as Go's `runtime.GOOS`/`GOARCH` name them (`linux/arm64`).
pub fn go_platform() -> String {
    format!("{}/{}", std::env::consts::OS, go_arch())
}

/// Rust's name of an architecture in Go's spelling; the names both use
/// alike pass through.
fn arch_in_go(rust_arch: &'static str) -> &'static str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_architectures_in_gos_words() {
        assert_eq!(arch_in_go("x86_64"), "amd64");
        assert_eq!(arch_in_go("aarch64"), "arm64");
        assert_eq!(arch_in_go("x86"), "386");
        assert_eq!(arch_in_go("riscv64"), "riscv64");
        assert!(go_platform().starts_with("linux/") || !cfg!(target_os = "linux"));
    }
}

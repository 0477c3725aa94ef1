//! The images skiff makes from the host's static busybox: the pod sandbox
//! ("pause") image, which must exist offline because there is no registry
//! to pull it from, and a busybox image for tests and examples.

use std::path::Path;

use super::archive::{ArchiveSummary, ImageArchiveError, ImageBuilder, LayerBuilder};
use super::pause_binary::pause_elf;

/// Name of skiff's pause image (containerd's `sandbox_image`).
pub const PAUSE_IMAGE: &str = "skiff.local/pause:1";

/// Name of the busybox test image. Its tag is not `latest`, so pods using
/// it default to `imagePullPolicy: IfNotPresent` and never try a registry.
pub const BUSYBOX_IMAGE: &str = "skiff.local/busybox:1";

/// The static busybox Debian's `busybox-static` installs.
pub const HOST_BUSYBOX: &str = "/bin/busybox";

/// Applets linked in the busybox image: a shell, coreutils, and the network
/// tools the acceptance tests use (httpd, wget, nc, nslookup).
const APPLETS: &[&str] = &[
    "sh", "ash", "cat", "chmod", "cp", "date", "dd", "df", "echo", "env", "false", "find", "grep",
    "head", "hostname", "httpd", "id", "ip", "kill", "ln", "ls", "mkdir", "mv", "nc", "nslookup",
    "ping", "printenv", "ps", "pwd", "rm", "rmdir", "sed", "seq", "sleep", "sort", "stat", "tail",
    "tar", "tee", "test", "top", "touch", "tr", "true", "uname", "uptime", "wc", "wget", "whoami",
    "xargs", "yes", "[",
];

/// Base filesystem shared by both images: busybox, `/etc/passwd` and
/// `/etc/group` (root and nobody), the usual empty mount points.
fn base_layer(busybox: &Path) -> Result<LayerBuilder, ImageArchiveError> {
    let mut l = LayerBuilder::new();
    l.host_file("/bin/busybox", busybox, 0o755)?;
    l.file(
        "/etc/passwd",
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        0o644,
    )?;
    l.file("/etc/group", b"root:x:0:\nnobody:x:65534:\n", 0o644)?;
    for dir in [
        "/dev",
        "/proc",
        "/sys",
        "/root",
        "/usr/bin",
        "/usr/sbin",
        "/sbin",
        "/var",
    ] {
        l.dir(dir, 0o755)?;
    }
    l.dir("/tmp", 0o1777)?;
    Ok(l)
}

/// The pause image. On x86_64 it holds only skiff's own pause program
/// (`pause_binary`): exits 0 on SIGTERM, reaps zombies. Elsewhere it falls
/// back to `busybox sleep`, which CRI's SIGKILL of sandboxes also stops.
pub fn pause_image(busybox_fallback: &Path) -> Result<ImageBuilder, ImageArchiveError> {
    if cfg!(target_arch = "x86_64") {
        let mut l = LayerBuilder::new();
        l.file("/pause", &pause_elf(), 0o755)?;
        return Ok(ImageBuilder::new(PAUSE_IMAGE, l.finish()?).entrypoint(["/pause"]));
    }
    let mut l = base_layer(busybox_fallback)?;
    l.symlink("/bin/sleep", "busybox")?;
    Ok(ImageBuilder::new(PAUSE_IMAGE, l.finish()?).entrypoint(["/bin/sleep", "2147483647"]))
}

/// The busybox image: `sh` by default, with the applets above linked in `/bin`.
pub fn busybox_image(busybox: &Path, reference: &str) -> Result<ImageBuilder, ImageArchiveError> {
    let mut l = base_layer(busybox)?;
    for applet in APPLETS {
        l.symlink(&format!("/bin/{applet}"), "busybox")?;
    }
    Ok(ImageBuilder::new(reference, l.finish()?).cmd(["sh"]))
}

/// Writes [`BUSYBOX_IMAGE`], built from the host's [`HOST_BUSYBOX`], as a
/// docker archive at `path`: what tests and benchmarks put in an airgap
/// directory or import, having no registry to pull it from.
pub fn write_host_busybox(path: &Path) -> Result<ArchiveSummary, ImageArchiveError> {
    busybox_image(Path::new(HOST_BUSYBOX), BUSYBOX_IMAGE)?.write_docker_archive(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer_entries(image: &ImageBuilder) -> Vec<(String, tar::EntryType, String)> {
        let (bytes, _) = image.to_docker_archive().unwrap();
        let mut outer = tar::Archive::new(&bytes[..]);
        let mut layer = Vec::new();
        for entry in outer.entries().unwrap() {
            let mut entry = entry.unwrap();
            if entry.path().unwrap().ends_with("layer.tar") {
                std::io::Read::read_to_end(&mut entry, &mut layer).unwrap();
            }
        }
        let mut inner = tar::Archive::new(&layer[..]);
        inner
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let link = e
                    .link_name()
                    .unwrap()
                    .map(|l| l.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (
                    e.path().unwrap().to_string_lossy().into_owned(),
                    e.header().entry_type(),
                    link,
                )
            })
            .collect()
    }

    #[test]
    fn busybox_image_links_the_applets_to_the_host_busybox() {
        let image = busybox_image(Path::new(HOST_BUSYBOX), BUSYBOX_IMAGE).unwrap();
        let entries = layer_entries(&image);
        let find = |name: &str| entries.iter().find(|(n, _, _)| n == name).cloned();
        let (_, kind, _) = find("bin/busybox").expect("busybox in image");
        assert_eq!(kind, tar::EntryType::Regular);
        for applet in [
            "bin/sh",
            "bin/sleep",
            "bin/echo",
            "bin/httpd",
            "bin/wget",
            "bin/nslookup",
        ] {
            let (_, kind, target) = find(applet).unwrap_or_else(|| panic!("{applet} missing"));
            assert_eq!(
                (kind, target.as_str()),
                (tar::EntryType::Symlink, "busybox")
            );
        }
        assert!(find("tmp/").is_some() && find("etc/passwd").is_some());
        let config: serde_json::Value = serde_json::from_slice(&image.config_json()).unwrap();
        assert_eq!(config["config"]["Cmd"], serde_json::json!(["sh"]));
    }

    #[test]
    fn pause_image_runs_the_pause_program() {
        let image = pause_image(Path::new(HOST_BUSYBOX)).unwrap();
        assert_eq!(image.reference(), PAUSE_IMAGE);
        let config: serde_json::Value = serde_json::from_slice(&image.config_json()).unwrap();
        let entries = layer_entries(&image);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(
                config["config"]["Entrypoint"],
                serde_json::json!(["/pause"])
            );
            let names: Vec<&str> = entries.iter().map(|(n, _, _)| n.as_str()).collect();
            assert_eq!(names, ["pause"]);
        } else {
            assert_eq!(
                config["config"]["Entrypoint"],
                serde_json::json!(["/bin/sleep", "2147483647"])
            );
            assert!(
                entries
                    .iter()
                    .any(|(n, _, t)| n == "bin/sleep" && t == "busybox")
            );
        }
    }

    #[test]
    fn a_missing_busybox_is_reported_with_its_path() {
        let err = busybox_image(Path::new("/nonexistent/busybox"), BUSYBOX_IMAGE).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/busybox"), "{err}");
    }
}

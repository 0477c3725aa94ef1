//! `skiff images`: import image archives into a node's containerd and list
//! its images, as k3s users do with `ctr images import` — for airgapped
//! nodes, without a registry.

use std::path::PathBuf;

use anyhow::Context;
use skiff_node::cri_api::Image;
use skiff_node::images::ImageImporter;
use skiff_node::{CriRuntime, CriTimeouts, Runtime};

/// `skiff images` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ImagesArgs {
    #[command(flatten)]
    pub data_dir: crate::data_dir::DataDir,

    /// Talk to this CRI socket instead of the node's own containerd.
    #[arg(long, env = "SKIFF_CONTAINER_RUNTIME_ENDPOINT", global = true)]
    pub container_runtime_endpoint: Option<String>,

    #[command(subcommand)]
    pub command: ImagesCommand,
}

/// What to do with images.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ImagesCommand {
    /// Import docker-archive or OCI-layout tar files.
    Import {
        /// Archives to import.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List images with their tags, ids and sizes.
    #[command(alias = "ls")]
    List,
}

fn socket(args: &ImagesArgs) -> anyhow::Result<PathBuf> {
    let mut options =
        skiff_node::containerd::bringup::BringUpOptions::new(args.data_dir.path.join("agent"));
    options.external_endpoint = args.container_runtime_endpoint.clone();
    skiff_node::containerd::bringup::runtime_socket(&options).context("locating the CRI socket")
}

/// Runs `skiff images ...`.
pub(crate) async fn run(args: ImagesArgs) -> anyhow::Result<()> {
    let socket = socket(&args)?;
    if !socket.exists() {
        anyhow::bail!(
            "no container runtime at {} (is the node running with --data-dir {}?)",
            socket.display(),
            args.data_dir.path.display()
        );
    }
    let cri = CriRuntime::new(&socket.to_string_lossy(), CriTimeouts::default())
        .context("connecting to the CRI socket")?;
    match args.command {
        ImagesCommand::Import { files } => {
            let importer = ImageImporter::new(&socket).wait_visible_through(cri);
            for file in files {
                let names = importer
                    .import(&file)
                    .await
                    .with_context(|| format!("importing {}", file.display()))?;
                for name in names {
                    println!("imported {name}");
                }
            }
        }
        ImagesCommand::List => {
            let mut images = cri.list_images().await.context("listing images")?;
            images.sort_by(|a, b| a.repo_tags.cmp(&b.repo_tags));
            print!("{}", table(&images));
        }
    }
    Ok(())
}

/// `crictl images`-style rows: one per tag (or `<none>`).
fn table(images: &[Image]) -> String {
    let mut rows = vec![[
        "IMAGE".to_string(),
        "TAG".to_string(),
        "IMAGE ID".to_string(),
        "SIZE".to_string(),
    ]];
    for image in images {
        let id = image.id.trim_start_matches("sha256:");
        let short_id = id.get(..13).unwrap_or(id).to_string();
        let size = human_size(image.size);
        let tags: Vec<(String, String)> = if image.repo_tags.is_empty() {
            vec![("<none>".into(), "<none>".into())]
        } else {
            image
                .repo_tags
                .iter()
                .map(|t| match t.rfind(':') {
                    Some(i) if !t[i..].contains('/') => {
                        (t[..i].to_string(), t[i + 1..].to_string())
                    }
                    _ => (t.clone(), "<none>".into()),
                })
                .collect()
        };
        for (repo, tag) in tags {
            rows.push([repo, tag, short_id.clone(), size.clone()]);
        }
    }
    crate::columns::columns(&rows)
}

/// Sizes as crictl prints them (decimal units).
fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        return format!("{bytes}B");
    }
    let number = format!("{value:.3}");
    let number = number.trim_end_matches('0').trim_end_matches('.');
    format!("{number}{}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_crictl() {
        assert_eq!(human_size(512), "512B");
        assert_eq!(human_size(1_234_567), "1.235MB");
        assert_eq!(human_size(2_000_000), "2MB");
    }

    #[test]
    fn one_row_per_tag_with_short_ids() {
        let image = Image {
            id: "sha256:0123456789abcdef0123".into(),
            repo_tags: vec!["skiff.local/busybox:1".into(), "localhost:5000/x:v2".into()],
            size: 1_500_000,
            ..Default::default()
        };
        let text = table(&[image]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("IMAGE"));
        assert!(
            lines[1].contains("skiff.local/busybox") && lines[1].contains(" 1 "),
            "{text}"
        );
        assert!(
            lines[2].contains("localhost:5000/x") && lines[2].contains("v2"),
            "{text}"
        );
        assert!(
            lines[1].contains("0123456789abc") && lines[1].ends_with("1.5MB"),
            "{text}"
        );
    }
}

//! Container images without a registry: building image archives from host
//! files (the pause image, a busybox test image), importing archives into
//! containerd (one file, or a whole airgap directory as k3s does).

pub mod archive;
pub mod builtin;
pub mod import;
pub mod pause_binary;

pub use archive::{ArchiveSummary, ImageArchiveError, ImageBuilder, LayerBuilder};
pub use builtin::{BUSYBOX_IMAGE, PAUSE_IMAGE, busybox_image, pause_image, write_host_busybox};
pub use import::{AirgapReport, ImageImporter, ImportError};

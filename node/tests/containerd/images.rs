//! Airgap import of skiff-built archives, seen through CRI.

use skiff_node::images::{self, ImageImporter};
use skiff_node::{CriError, Runtime, RuntimeError};

use crate::harness::TestNode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn airgap_archives_are_imported_and_listed_through_cri() {
    let node = TestNode::start(0).await;

    // The airgap dir held busybox; the pause image is skiff's own.
    let report = node.runtime.as_ref().expect("runtime").airgap_report();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let imported: Vec<&str> = report
        .imported
        .iter()
        .flat_map(|(_, names)| names.iter().map(String::as_str))
        .collect();
    assert_eq!(imported, [images::BUSYBOX_IMAGE]);

    let listed = Runtime::list_images(&node.cri).await.expect("ListImages");
    for (name, config_digest) in &node.image_ids {
        let image = listed
            .iter()
            .find(|i| i.repo_tags.iter().any(|t| t == name))
            .unwrap_or_else(|| panic!("{name} not listed: {listed:?}"));
        // CRI's image id is the digest of the config blob we wrote.
        assert_eq!(&image.id, config_digest);
        assert!(image.size > 0);
    }

    let status = node
        .cri
        .image_status(images::BUSYBOX_IMAGE)
        .await
        .expect("ImageStatus")
        .expect("busybox present");
    assert_eq!(&status.id, &node.image_ids[images::BUSYBOX_IMAGE]);
    assert!(
        node.cri
            .image_status("skiff.local/absent:1")
            .await
            .expect("ImageStatus")
            .is_none()
    );

    // Re-importing the same archive is harmless and keeps the same id.
    let archive = node.options.images_dir().join("busybox.tar");
    let names = ImageImporter::new(node.paths.socket())
        .import(&archive)
        .await
        .expect("re-import");
    assert_eq!(names, [images::BUSYBOX_IMAGE]);
    let again = node
        .cri
        .image_status(images::BUSYBOX_IMAGE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.id, status.id);

    // With no registry, a pull of an absent image fails with the gRPC error kept.
    let err = node
        .cri
        .pull_image("skiff.local/absent:1", None, None)
        .await
        .expect_err("nothing to pull from");
    assert!(
        matches!(
            err,
            RuntimeError::Cri(CriError::Rpc {
                method: "PullImage",
                ..
            })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("skiff.local/absent:1"), "{err}");

    // A removed image disappears from the list.
    node.cri
        .remove_image(images::BUSYBOX_IMAGE)
        .await
        .expect("RemoveImage");
    assert!(
        node.cri
            .image_status(images::BUSYBOX_IMAGE)
            .await
            .unwrap()
            .is_none()
    );

    node.teardown().await;
}

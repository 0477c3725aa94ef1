//! `application/vnd.kubernetes.protobuf` bodies: the `k8s\0` envelope and
//! the object inside, decoded into the JSON the handlers work on.

use crate::assert_refused_with;
use skiff_apiserver::protobuf::{Envelope, MEDIA_TYPE};

/// Checks one input; panics where skiff answers it wrongly.
pub fn run(data: &[u8]) {
    match skiff_apiserver::fuzzing::decode_body(Some(MEDIA_TYPE), data) {
        Ok(object) => {
            // apiVersion and kind come from the envelope and must survive.
            let envelope = Envelope::parse(data).expect("a decoded body has an envelope");
            assert_eq!(object["apiVersion"], envelope.api_version.as_str());
            assert_eq!(object["kind"], envelope.kind.as_str());
        }
        Err(e) => assert_refused_with(&e, &[400]),
    }
    if let Ok(envelope) = Envelope::parse(data) {
        let encoded = Envelope::encode(&envelope.api_version, &envelope.kind, envelope.raw.clone());
        let again = Envelope::parse(&encoded).expect("a re-encoded envelope parses");
        assert_eq!(
            (again.api_version, again.kind, again.raw),
            (envelope.api_version, envelope.kind, envelope.raw)
        );
    }
}

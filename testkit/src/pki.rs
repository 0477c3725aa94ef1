//! Certificates for the fake TLS servers tests stand up (admission
//! webhooks, extension API servers, kubelet listeners): a CA of the test's
//! own, trusted through the `caBundle` that names it, and serving
//! certificates signed by it, by another issuer (the cluster's CA) or by
//! nobody.

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// What a server certificate for `cn` naming `names` (IP addresses or DNS
/// names) states: the fake servers' certificates differ in these only.
pub fn serving_params(cn: &str, names: &[&str]) -> CertificateParams {
    // rcgen's constructor names IP addresses as IP names, the rest as DNS.
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("subject alternative names");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params
}

/// `params` signed by `issuer` (or self-signed when `None`) with a new
/// key: the PEM certificate and key a fake server presents.
pub fn issue(
    mut params: CertificateParams,
    issuer: Option<&Issuer<'static, KeyPair>>,
) -> (String, String) {
    let key = KeyPair::generate().expect("a key");
    let cert = match issuer {
        Some(issuer) => {
            params.use_authority_key_identifier_extension = true;
            params
                .signed_by(&key, issuer)
                .expect("a signed certificate")
        }
        None => params.self_signed(&key).expect("a self-signed certificate"),
    };
    (cert.pem(), key.serialize_pem())
}

/// A CA of a test's own (not the cluster's) that signs its fake servers'
/// certificates: webhooks and extension API servers, trusted through the
/// `caBundle` that names it.
pub struct TestCa {
    /// The CA's certificate (PEM).
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    /// A new CA, `skiff-test-ca`, with a key of its own.
    pub fn new() -> Self {
        let key = KeyPair::generate().expect("the CA's key");
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "skiff-test-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let pem = params
            .self_signed(&key)
            .expect("the CA's certificate")
            .pem();
        let issuer = Issuer::from_ca_cert_pem(&pem, key).expect("the CA as an issuer");
        Self { pem, issuer }
    }

    /// The CA as a `caBundle` field holds it (base64 PEM).
    pub fn bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.pem)
    }

    /// A serving certificate from this CA naming `names` (IP addresses or
    /// DNS names; the first is its common name): PEM certificate and key.
    pub fn serving(&self, names: &[&str]) -> (String, String) {
        issue(serving_params(names[0], names), Some(&self.issuer))
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

/// A P-256 signing key of a fake OpenID Connect issuer: the key as PKCS#8
/// PEM (what a JWT library signs with) and its public half as the JWK
/// named `kid` the issuer publishes.
pub fn jwt_signing_key(kid: &str) -> (String, serde_json::Value) {
    let key = KeyPair::generate().expect("a P-256 key");
    let point = key.public_key_raw();
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let jwk = serde_json::json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256",
        "use": "sig", "x": b64(&point[1..33]), "y": b64(&point[33..65])});
    (key.serialize_pem(), jwk)
}

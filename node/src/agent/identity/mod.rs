//! Who the node is, towards the API server and towards the clients of its
//! node server: joining with a token ([`join`]), the client certificate a
//! joined agent obtains and renews ([`client_cert`]), the API client of an
//! agent apart from the server ([`remote`]), and the node server's serving
//! certificate ([`serving_cert`]), signed in process or through a
//! CertificateSigningRequest ([`csr_signer`]).

pub mod client_cert;
pub mod csr_signer;
pub mod join;
pub mod pki;
pub mod remote;
pub mod serving_cert;
#[cfg(test)]
pub(crate) mod test_pki;

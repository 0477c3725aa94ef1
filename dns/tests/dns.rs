//! The DNS server over real sockets: queries over UDP and TCP on loopback for
//! every record kind, negative answers, and forwarding to a fake upstream.

mod dns {
    mod api;
    mod forwarding;
    mod records;
    pub mod support;
}

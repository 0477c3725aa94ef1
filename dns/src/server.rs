//! The DNS front end: hickory-server's UDP and TCP listeners, and the request
//! handler that answers cluster names from the zone and forwards the rest.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{
    Edns, Header, HeaderCounts, Message, MessageType, Metadata, OpCode, ResponseCode,
};
use hickory_proto::rr::Record;
use hickory_server::net::runtime::Time;
use hickory_server::net::xfer::Protocol;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use tokio::net::{TcpListener, UdpSocket};

use crate::forward::Forwarder;
use crate::zone::{ClusterZone, Lookup};

/// How long an idle TCP client may keep its connection.
const TCP_IDLE: Duration = Duration::from_secs(10);
/// Responses buffered per TCP connection.
const TCP_BUFFER: usize = 64;
/// The UDP payload size we advertise to EDNS clients.
const EDNS_PAYLOAD: u16 = 1232;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A listen address could not be bound.
    #[error("binding DNS {protocol} on {address}: {source}")]
    Bind {
        /// "UDP" or "TCP".
        protocol: &'static str,
        /// The address.
        address: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Answers one query at a time from the zone or the upstreams.
pub struct DnsHandler {
    zone: Arc<ClusterZone>,
    forwarder: Forwarder,
    /// CoreDNS's `server` label, `dns://:<port>`, set once bound.
    server: String,
}

impl DnsHandler {
    /// A handler answering from `zone`, forwarding other names with `forwarder`.
    pub fn new(zone: Arc<ClusterZone>, forwarder: Forwarder) -> Self {
        Self {
            zone,
            forwarder,
            server: String::new(),
        }
    }

    async fn forward<R: ResponseHandler>(
        &self,
        request: &Request,
        response: &mut R,
        edns: Option<&Edns>,
    ) -> ResponseInfo {
        let over_tcp = request.protocol() == Protocol::Tcp;
        let upstream = match self.forwarder.forward(request.as_slice(), over_tcp).await {
            Ok(bytes) => Message::from_vec(&bytes).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let message = match upstream {
            Ok(message) => message,
            Err(reason) => {
                tracing::debug!(%reason, "forwarding failed");
                return send_error(request, response, ResponseCode::ServFail).await;
            }
        };
        let mut metadata = message.metadata;
        metadata.id = request.metadata.id;
        let mut builder = MessageResponseBuilder::from_message_request(request);
        if let Some(edns) = edns {
            builder.edns(edns);
        }
        let sent = response
            .send_response(builder.build(
                metadata,
                message.answers.iter(),
                message.authorities.iter(),
                std::iter::empty(),
                message.additionals.iter(),
            ))
            .await;
        finish(sent, metadata)
    }
}

#[async_trait::async_trait]
impl RequestHandler for DnsHandler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        response: R,
    ) -> ResponseInfo {
        let started = std::time::Instant::now();
        let (info, plugin) = self.answer(request, response).await;
        crate::metrics::record(&crate::metrics::Answered {
            server: &self.server,
            query_type: request.request_info().ok().map(|i| i.query.query_type()),
            tcp: request.protocol() == Protocol::Tcp,
            client: request.src(),
            rcode: rcode_label(info.response_code),
            plugin,
            took: started.elapsed(),
        });
        info
    }
}

/// CoreDNS's `rcode` label: the code's mnemonic.
fn rcode_label(code: ResponseCode) -> &'static str {
    match code {
        ResponseCode::NoError => "NOERROR",
        ResponseCode::FormErr => "FORMERR",
        ResponseCode::ServFail => "SERVFAIL",
        ResponseCode::NXDomain => "NXDOMAIN",
        ResponseCode::NotImp => "NOTIMP",
        ResponseCode::Refused => "REFUSED",
        ResponseCode::YXDomain => "YXDOMAIN",
        ResponseCode::NotAuth => "NOTAUTH",
        _ => "other",
    }
}

impl DnsHandler {
    /// Answers one request; also says which part did (CoreDNS's `plugin`
    /// label: `kubernetes` for cluster names, `forward` for the rest).
    async fn answer<R: ResponseHandler>(
        &self,
        request: &Request,
        mut response: R,
    ) -> (ResponseInfo, &'static str) {
        if request.metadata.message_type != MessageType::Query
            || request.metadata.op_code != OpCode::Query
        {
            return (
                send_error(request, &mut response, ResponseCode::NotImp).await,
                "",
            );
        }
        let Ok(info) = request.request_info() else {
            return (
                send_error(request, &mut response, ResponseCode::FormErr).await,
                "",
            );
        };
        let edns = request.edns.as_ref().map(|_| {
            let mut edns = Edns::new();
            edns.set_max_payload(EDNS_PAYLOAD);
            edns
        });
        let name = info.query.name().to_string();
        let lookup = self.zone.lookup(&name, info.query.query_type());
        let (code, answers, additionals, negative) = match lookup {
            Lookup::Forward => {
                return (
                    self.forward(request, &mut response, edns.as_ref()).await,
                    "forward",
                );
            }
            Lookup::Answer {
                answers,
                additionals,
            } => (ResponseCode::NoError, answers, additionals, false),
            Lookup::NoData => (ResponseCode::NoError, Vec::new(), Vec::new(), true),
            Lookup::NxDomain => (ResponseCode::NXDomain, Vec::new(), Vec::new(), true),
        };
        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.authoritative = true;
        metadata.recursion_available = true;
        metadata.response_code = code;
        let soa: Vec<&Record> = if negative {
            vec![self.zone.soa()]
        } else {
            Vec::new()
        };
        let mut builder = MessageResponseBuilder::from_message_request(request);
        if let Some(edns) = edns.as_ref() {
            builder.edns(edns);
        }
        let sent = response
            .send_response(builder.build(
                metadata,
                answers.iter(),
                std::iter::empty(),
                soa,
                additionals.iter(),
            ))
            .await;
        (finish(sent, metadata), "kubernetes")
    }
}

async fn send_error<R: ResponseHandler>(
    request: &Request,
    response: &mut R,
    code: ResponseCode,
) -> ResponseInfo {
    let builder = MessageResponseBuilder::from_message_request(request);
    let mut metadata = Metadata::response_from_request(&request.metadata);
    metadata.response_code = code;
    let sent = response
        .send_response(builder.error_msg(&request.metadata, code))
        .await;
    finish(sent, metadata)
}

fn finish(
    sent: Result<ResponseInfo, hickory_server::net::NetError>,
    metadata: Metadata,
) -> ResponseInfo {
    sent.unwrap_or_else(|error| {
        tracing::debug!(%error, "sending a DNS response failed");
        let mut metadata = metadata;
        metadata.response_code = ResponseCode::ServFail;
        ResponseInfo::from(Header {
            metadata,
            counts: HeaderCounts::default(),
        })
    })
}

/// A DNS server listening on UDP and TCP; stops when dropped or shut down.
pub struct RunningServer {
    server: hickory_server::Server<DnsHandler>,
    local: Vec<SocketAddr>,
}

impl RunningServer {
    /// Binds UDP and TCP on each address (port 0: one free port shared by
    /// both protocols) and starts answering.
    pub async fn bind(listen: &[SocketAddr], mut handler: DnsHandler) -> Result<Self, ServeError> {
        let mut pairs = Vec::new();
        let mut local = Vec::new();
        for address in listen {
            let (udp, tcp) = bind_pair(*address).await?;
            let bound = udp.local_addr().map_err(|source| ServeError::Bind {
                protocol: "UDP",
                address: *address,
                source,
            })?;
            pairs.push((udp, tcp));
            local.push(bound);
        }
        if let Some(first) = local.first() {
            handler.server = format!("dns://:{}", first.port());
        }
        let mut server = hickory_server::Server::new(handler);
        for (udp, tcp) in pairs {
            server.register_socket(udp);
            server.register_listener(tcp, TCP_IDLE, TCP_BUFFER);
        }
        Ok(Self { server, local })
    }

    /// The addresses actually bound (UDP and TCP share each).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local
    }

    /// Stops listening and waits for in-flight requests.
    pub async fn shutdown(mut self) {
        if let Err(error) = self.server.shutdown_gracefully().await {
            tracing::debug!(%error, "DNS server stopped with an error");
        }
    }
}

/// UDP and TCP on the same address; with port 0, retries until one free port
/// works for both.
async fn bind_pair(address: SocketAddr) -> Result<(UdpSocket, TcpListener), ServeError> {
    let udp_err = |source| ServeError::Bind {
        protocol: "UDP",
        address,
        source,
    };
    let mut attempts = 0;
    loop {
        let udp = UdpSocket::bind(address).await.map_err(udp_err)?;
        let port = udp.local_addr().map_err(udp_err)?.port();
        let tcp_address = SocketAddr::new(address.ip(), port);
        match TcpListener::bind(tcp_address).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(_) if address.port() == 0 && attempts < 16 => attempts += 1,
            Err(source) => {
                return Err(ServeError::Bind {
                    protocol: "TCP",
                    address: tcp_address,
                    source,
                });
            }
        }
    }
}

//! Forwarding of non-cluster names to the host's resolvers: the query's
//! bytes go upstream as they came (UDP, or TCP when the client used TCP or the
//! UDP answer was truncated); upstreams are tried in order.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// Largest UDP answer we accept from an upstream.
const MAX_UDP: usize = 4096;
/// Offset of the flags byte holding the TC bit in a DNS header.
const FLAGS_BYTE: usize = 2;
const TRUNCATED_BIT: u8 = 0x02;

/// Why forwarding failed.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// No upstream resolver is configured.
    #[error("no upstream resolver configured")]
    NoUpstream,
    /// Every upstream failed; the last failure.
    #[error("upstream {upstream} failed: {reason}")]
    Upstream {
        /// The last upstream tried.
        upstream: SocketAddr,
        /// What went wrong.
        reason: String,
    },
}

/// Sends queries to the upstream resolvers.
#[derive(Debug, Clone)]
pub struct Forwarder {
    upstreams: Vec<SocketAddr>,
    timeout: Duration,
}

impl Forwarder {
    /// A forwarder trying `upstreams` in order, `timeout` per attempt.
    pub fn new(upstreams: Vec<SocketAddr>, timeout: Duration) -> Self {
        Self { upstreams, timeout }
    }

    /// The upstreams, in the order they are tried.
    pub fn upstreams(&self) -> &[SocketAddr] {
        &self.upstreams
    }

    /// The upstream's raw answer to the raw `query`.
    pub async fn forward(&self, query: &[u8], over_tcp: bool) -> Result<Vec<u8>, ForwardError> {
        let mut last = Err(ForwardError::NoUpstream);
        for upstream in &self.upstreams {
            crate::metrics::forwarded(*upstream);
            let attempt = if over_tcp {
                self.tcp(*upstream, query).await
            } else {
                match self.udp(*upstream, query).await {
                    Ok(answer) if is_truncated(&answer) => self.tcp(*upstream, query).await,
                    other => other,
                }
            };
            match attempt {
                Ok(answer) => return Ok(answer),
                Err(reason) => {
                    tracing::debug!(%upstream, %reason, "upstream resolver failed");
                    last = Err(ForwardError::Upstream {
                        upstream: *upstream,
                        reason,
                    });
                }
            }
        }
        last
    }

    async fn udp(&self, upstream: SocketAddr, query: &[u8]) -> Result<Vec<u8>, String> {
        let local: SocketAddr = match upstream.ip() {
            IpAddr::V4(_) => ([0, 0, 0, 0], 0).into(),
            IpAddr::V6(_) => ([0u16; 8], 0).into(),
        };
        let socket = UdpSocket::bind(local).await.map_err(|e| e.to_string())?;
        socket.connect(upstream).await.map_err(|e| e.to_string())?;
        socket.send(query).await.map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; MAX_UDP];
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let n = tokio::time::timeout_at(deadline, socket.recv(&mut buf))
                .await
                .map_err(|_| "timed out".to_string())?
                .map_err(|e| e.to_string())?;
            // Only an answer carrying the query's id counts; anything else
            // is a stray datagram.
            if n >= 2 && query.len() >= 2 && buf[..2] == query[..2] {
                buf.truncate(n);
                return Ok(buf);
            }
        }
    }

    async fn tcp(&self, upstream: SocketAddr, query: &[u8]) -> Result<Vec<u8>, String> {
        let exchange = async {
            let mut stream = TcpStream::connect(upstream).await?;
            let len =
                u16::try_from(query.len()).map_err(|_| std::io::Error::other("query too long"))?;
            let mut framed = Vec::with_capacity(query.len() + 2);
            framed.extend_from_slice(&len.to_be_bytes());
            framed.extend_from_slice(query);
            stream.write_all(&framed).await?;
            let mut len = [0u8; 2];
            stream.read_exact(&mut len).await?;
            let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
            stream.read_exact(&mut answer).await?;
            Ok::<_, std::io::Error>(answer)
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| "timed out".to_string())?
            .map_err(|e| e.to_string())
    }
}

fn is_truncated(answer: &[u8]) -> bool {
    answer
        .get(FLAGS_BYTE)
        .is_some_and(|flags| flags & TRUNCATED_BIT != 0)
}

/// The nameservers of a resolv.conf text (port 53), in order.
pub fn nameservers(resolv_conf: &str) -> Vec<SocketAddr> {
    resolv_conf
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == "nameserver").then(|| words.next())?
        })
        .filter_map(|ip| ip.split('%').next()?.parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nameservers_come_from_resolv_conf_in_order() {
        let text = "# comment\nsearch example.com\nnameserver 10.0.0.2\nnameserver fe80::1%eth0\noptions ndots:1\nnameserver bogus\n";
        assert_eq!(
            nameservers(text),
            vec![
                "10.0.0.2:53".parse::<SocketAddr>().unwrap(),
                "[fe80::1]:53".parse().unwrap()
            ]
        );
    }

    #[tokio::test]
    async fn without_upstreams_forwarding_fails_cleanly() {
        let forwarder = Forwarder::new(Vec::new(), Duration::from_millis(100));
        assert!(matches!(
            forwarder.forward(&[0, 1, 0, 0], false).await,
            Err(ForwardError::NoUpstream)
        ));
    }

    #[tokio::test]
    async fn a_silent_upstream_times_out_and_the_next_answers() {
        let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let answering = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let answering_addr = answering.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            let (n, from) = answering.recv_from(&mut buf).await.unwrap();
            let mut reply = buf[..n].to_vec();
            reply[2] |= 0x80;
            answering.send_to(&reply, from).await.unwrap();
        });
        let forwarder = Forwarder::new(
            vec![silent.local_addr().unwrap(), answering_addr],
            Duration::from_millis(200),
        );
        let answer = forwarder.forward(&[7, 9, 1, 0], false).await.unwrap();
        assert_eq!(answer, [7, 9, 0x81, 0]);
    }
}

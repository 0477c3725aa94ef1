//! Port-forward for kubectl 1.32, which tunnels an SPDY/3.1 session inside
//! WebSocket binary messages (subprotocol `SPDY/3.1+portforward.k8s.io`).
//! The runtime speaks that SPDY session natively once upgraded, so the
//! tunnel only unwraps messages into bytes and wraps bytes into messages;
//! the SPDY frames themselves pass untouched.

use futures::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

/// The WebSocket subprotocol of tunnelled SPDY port-forwarding.
pub(crate) const TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// The SPDY subprotocol of port-forwarding.
pub(crate) const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

/// Carries the session until either side closes.
pub(crate) async fn run(client: Upgraded, runtime: Upgraded) {
    let ws = WebSocketStream::from_raw_socket(TokioIo::new(client), Role::Server, None).await;
    let (mut ws_tx, mut ws_rx) = ws.split();
    let (mut rt_rx, mut rt_tx) = tokio::io::split(TokioIo::new(runtime));
    let inbound = async {
        while let Some(Ok(message)) = ws_rx.next().await {
            match message {
                Message::Binary(data) => {
                    let written = rt_tx.write_all(&data).await;
                    if written.is_err() {
                        break;
                    }
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
        let _ = rt_tx.shutdown().await;
    };
    let outbound = async {
        let mut buffer = vec![0u8; 32 * 1024];
        loop {
            match rt_rx.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if ws_tx
                        .send(Message::binary(buffer[..n].to_vec()))
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
        let _ = ws_tx.send(super::upgrade::normal_close()).await;
    };
    tokio::select! {
        _ = inbound => {}
        _ = outbound => {}
    }
}

//! Exec and attach for WebSocket clients (`v5.channel.k8s.io`, which kubectl
//! 1.32 speaks, or `v4.channel.k8s.io`) over SPDY to the runtime, as
//! upstream's API server translates them. SPDY is what lets stdin end: v5's
//! close frame for channel 0 becomes a FIN on the runtime's stdin stream,
//! which containerd 1.6's WebSocket server has no way to express.
//!
//! Channels: 0 stdin, 1 stdout, 2 stderr, 3 error (the final Status), 4
//! resize, 255 close (v5). SPDY streams are opened by us, error first.

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::spdy::{self, Frame};
use super::streams::StreamFlags;

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// The SPDY stream id of each channel in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StreamIds {
    error: u32,
    stdin: Option<u32>,
    stdout: Option<u32>,
    stderr: Option<u32>,
    resize: Option<u32>,
}

impl StreamIds {
    /// Client streams take odd ids in creation order: error first.
    fn for_flags(flags: &StreamFlags) -> Self {
        let mut next = 1;
        let mut take = |on: bool| {
            on.then(|| {
                next += 2;
                next
            })
        };
        Self {
            error: 1,
            stdin: take(flags.stdin),
            stdout: take(flags.stdout),
            stderr: take(flags.stderr),
            resize: take(flags.tty),
        }
    }

    fn opened(&self) -> Vec<(u32, &'static str)> {
        let mut out = vec![(self.error, "error")];
        out.extend(self.stdin.map(|id| (id, "stdin")));
        out.extend(self.stdout.map(|id| (id, "stdout")));
        out.extend(self.stderr.map(|id| (id, "stderr")));
        out.extend(self.resize.map(|id| (id, "resize")));
        out
    }

    fn channel_of(&self, stream: u32) -> Option<u8> {
        if stream == self.error {
            Some(ERROR)
        } else if Some(stream) == self.stdout {
            Some(STDOUT)
        } else if Some(stream) == self.stderr {
            Some(STDERR)
        } else {
            None
        }
    }
}

/// What the client-side task asks the SPDY writer to send.
enum Out {
    Data { stream: u32, data: Bytes, fin: bool },
    Pong(u32),
}

/// Runs one session between the client's WebSocket and the runtime's SPDY
/// connection, until the runtime ends it or the client goes away.
pub(crate) async fn run(client: Upgraded, runtime: Upgraded, flags: StreamFlags) {
    let ws = WebSocketStream::from_raw_socket(TokioIo::new(client), Role::Server, None).await;
    let (mut ws_tx, mut ws_rx) = ws.split();
    let (spdy_rx, spdy_tx) = tokio::io::split(TokioIo::new(runtime));
    let mut writer = spdy::Writer::new(spdy_tx);
    let ids = StreamIds::for_flags(&flags);
    for (id, kind) in ids.opened() {
        if let Err(error) = writer.syn_stream(id, &[("streamtype", kind)]).await {
            tracing::debug!(%error, "opening exec streams");
            return;
        }
    }

    let (out_tx, mut out_rx) = mpsc::channel::<Out>(64);
    let write_task = tokio::spawn(async move {
        while let Some(out) = out_rx.recv().await {
            let sent = match out {
                Out::Data { stream, data, fin } => writer.data(stream, &data, fin).await,
                Out::Pong(id) => writer.ping(id).await,
            };
            if sent.is_err() {
                break;
            }
        }
    });

    let client_task = {
        let out_tx = out_tx.clone();
        async move {
            while let Some(Ok(message)) = ws_rx.next().await {
                // The Python client sends text frames (its channel byte a
                // character); the runtime's server reads both alike.
                let data = match message {
                    Message::Binary(b) => b,
                    Message::Text(t) => Bytes::from(t),
                    Message::Close(_) => break,
                    _ => continue,
                };
                let Some((&channel, payload)) = data.split_first() else {
                    continue;
                };
                let out = match (channel, ids.stdin, ids.resize) {
                    (STDIN, Some(stream), _) => Out::Data {
                        stream,
                        data: data.slice(1..),
                        fin: false,
                    },
                    (RESIZE, _, Some(stream)) => Out::Data {
                        stream,
                        data: data.slice(1..),
                        fin: false,
                    },
                    (CLOSE, Some(stream), _) if payload.first() == Some(&STDIN) => Out::Data {
                        stream,
                        data: Bytes::new(),
                        fin: true,
                    },
                    _ => continue,
                };
                if out_tx.send(out).await.is_err() {
                    break;
                }
            }
        }
    };

    let runtime_task = async {
        let mut reader = spdy_rx;
        let mut open: Vec<u32> = [Some(ids.error), ids.stdout, ids.stderr]
            .into_iter()
            .flatten()
            .collect();
        while !open.is_empty() {
            let frame = match spdy::read_frame(&mut reader).await {
                Ok(Some(f)) => f,
                Ok(None) | Err(_) => break,
            };
            match frame {
                Frame::Data { stream, fin, data } => {
                    if let Some(channel) = ids.channel_of(stream)
                        && !data.is_empty()
                    {
                        let mut message = Vec::with_capacity(data.len() + 1);
                        message.push(channel);
                        message.extend_from_slice(&data);
                        if ws_tx.send(Message::binary(message)).await.is_err() {
                            return;
                        }
                    }
                    if fin {
                        open.retain(|s| *s != stream);
                    }
                }
                Frame::Reply { stream, fin: true } | Frame::Reset { stream } => {
                    open.retain(|s| *s != stream);
                }
                Frame::Ping(id) => {
                    let _ = out_tx.send(Out::Pong(id)).await;
                }
                Frame::GoAway => break,
                Frame::Reply { .. } | Frame::Other => {}
            }
        }
        let _ = ws_tx.send(super::upgrade::normal_close()).await;
    };

    tokio::select! {
        _ = runtime_task => {}
        _ = client_task => {}
    }
    write_task.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_numbered_error_first_in_creation_order() {
        let ids = StreamIds::for_flags(&StreamFlags {
            stdin: true,
            stdout: true,
            stderr: true,
            tty: false,
        });
        assert_eq!(
            ids.opened(),
            [(1, "error"), (3, "stdin"), (5, "stdout"), (7, "stderr")]
        );
        assert_eq!(ids.channel_of(5), Some(STDOUT));
        assert_eq!(ids.channel_of(3), None);
        let tty = StreamIds::for_flags(&StreamFlags {
            stdin: true,
            stdout: true,
            stderr: false,
            tty: true,
        });
        assert_eq!(
            tty.opened(),
            [(1, "error"), (3, "stdin"), (5, "stdout"), (7, "resize")]
        );
    }
}

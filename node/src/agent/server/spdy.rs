//! The client side of SPDY/3.1 framing, as much as talking to a runtime's
//! streaming server needs: open streams with headers (SYN_STREAM), send data
//! and half-close (DATA with FIN), answer PINGs, and read the server's
//! frames.
//!
//! Header blocks must be a zlib stream; the receiver only uses SPDY's
//! dictionary when the stream's header announces one, so ours is written as
//! stored (uncompressed) deflate blocks without a dictionary, each followed
//! by a sync-flush marker.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
/// The FIN flag of DATA and SYN frames.
pub(crate) const FLAG_FIN: u8 = 0x01;
/// Frames larger than this are refused (the runtime sends at most 32 KiB).
const MAX_FRAME: usize = 16 << 20;

/// A frame read from the server.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Data on a stream; `fin` half-closes it.
    Data {
        /// The stream.
        stream: u32,
        /// Whether the server is done sending on it.
        fin: bool,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The server accepted a stream (its headers are not needed).
    Reply {
        /// The stream.
        stream: u32,
        /// Whether the server is done sending on it.
        fin: bool,
    },
    /// The server reset a stream.
    Reset {
        /// The stream.
        stream: u32,
    },
    /// A PING to echo.
    Ping(u32),
    /// The session ends.
    GoAway,
    /// Anything else (SETTINGS, WINDOW_UPDATE, HEADERS, server pushes).
    Other,
}

/// Writes frames; owns the header compression stream.
pub(crate) struct Writer<W> {
    io: W,
    header_stream_started: bool,
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    /// Frames written to `io`.
    pub(crate) fn new(io: W) -> Self {
        Self {
            io,
            header_stream_started: false,
        }
    }

    /// Opens stream `id` with `headers` (lower-case names).
    pub(crate) async fn syn_stream(
        &mut self,
        id: u32,
        headers: &[(&str, &str)],
    ) -> std::io::Result<()> {
        let block = self.header_block(headers);
        let mut body = Vec::with_capacity(10 + block.len());
        body.extend_from_slice(&(id & 0x7fff_ffff).to_be_bytes());
        body.extend_from_slice(&0u32.to_be_bytes());
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&block);
        self.control(SYN_STREAM, 0, &body).await
    }

    /// Sends `data` on stream `id`, half-closing it when `fin`.
    pub(crate) async fn data(&mut self, id: u32, data: &[u8], fin: bool) -> std::io::Result<()> {
        for (i, chunk) in data.chunks(0xff_ffff).enumerate() {
            let last = (i + 1) * 0xff_ffff >= data.len();
            self.data_frame(id, chunk, fin && last).await?;
        }
        if data.is_empty() {
            self.data_frame(id, &[], fin).await?;
        }
        self.io.flush().await
    }

    /// Echoes a PING.
    pub(crate) async fn ping(&mut self, id: u32) -> std::io::Result<()> {
        self.control(PING, 0, &id.to_be_bytes()).await
    }

    async fn data_frame(&mut self, id: u32, data: &[u8], fin: bool) -> std::io::Result<()> {
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&(id & 0x7fff_ffff).to_be_bytes());
        head[4] = if fin { FLAG_FIN } else { 0 };
        head[5..].copy_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
        self.io.write_all(&head).await?;
        self.io.write_all(data).await
    }

    async fn control(&mut self, kind: u16, flags: u8, body: &[u8]) -> std::io::Result<()> {
        let mut head = [0u8; 8];
        head[..2].copy_from_slice(&(0x8000 | VERSION).to_be_bytes());
        head[2..4].copy_from_slice(&kind.to_be_bytes());
        head[4] = flags;
        head[5..].copy_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        self.io.write_all(&head).await?;
        self.io.write_all(body).await?;
        self.io.flush().await
    }

    /// The headers as the next piece of the session's zlib stream.
    fn header_block(&mut self, headers: &[(&str, &str)]) -> Vec<u8> {
        let mut plain = Vec::new();
        plain.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        for (name, value) in headers {
            plain.extend_from_slice(&(name.len() as u32).to_be_bytes());
            plain.extend_from_slice(name.as_bytes());
            plain.extend_from_slice(&(value.len() as u32).to_be_bytes());
            plain.extend_from_slice(value.as_bytes());
        }
        let mut out = Vec::with_capacity(plain.len() + 16);
        if !self.header_stream_started {
            // zlib header: deflate, 32 KiB window, no dictionary.
            out.extend_from_slice(&[0x78, 0x01]);
            self.header_stream_started = true;
        }
        for chunk in plain.chunks(0xffff) {
            stored_block(&mut out, chunk);
        }
        // Sync flush: an empty stored block.
        stored_block(&mut out, &[]);
        out
    }
}

/// A non-final stored deflate block.
fn stored_block(out: &mut Vec<u8>, data: &[u8]) {
    let len = data.len() as u16;
    out.push(0x00);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(data);
}

/// Reads the next frame; `None` at the end of the connection.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(io: &mut R) -> std::io::Result<Option<Frame>> {
    let mut head = [0u8; 8];
    match io.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let flags = head[4];
    let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("SPDY frame of {len} bytes"),
        ));
    }
    let mut body = vec![0u8; len];
    io.read_exact(&mut body).await?;
    let word = |at: usize| -> u32 {
        body.get(at..at + 4)
            .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if head[0] & 0x80 == 0 {
        let stream = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) & 0x7fff_ffff;
        return Ok(Some(Frame::Data {
            stream,
            fin: flags & FLAG_FIN != 0,
            data: body,
        }));
    }
    let kind = u16::from_be_bytes([head[2], head[3]]);
    Ok(Some(match kind {
        SYN_REPLY => Frame::Reply {
            stream: word(0) & 0x7fff_ffff,
            fin: flags & FLAG_FIN != 0,
        },
        RST_STREAM => Frame::Reset {
            stream: word(0) & 0x7fff_ffff,
        },
        PING => Frame::Ping(word(0)),
        GOAWAY => Frame::GoAway,
        _ => Frame::Other,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_through_the_wire_format() {
        let (client, mut server) = tokio::io::duplex(4096);
        let mut w = Writer::new(client);
        w.data(5, b"hello", false).await.unwrap();
        w.data(5, b"", true).await.unwrap();
        w.ping(2).await.unwrap();
        w.syn_stream(1, &[("streamtype", "error")]).await.unwrap();
        assert_eq!(
            read_frame(&mut server).await.unwrap(),
            Some(Frame::Data {
                stream: 5,
                fin: false,
                data: b"hello".to_vec()
            })
        );
        assert_eq!(
            read_frame(&mut server).await.unwrap(),
            Some(Frame::Data {
                stream: 5,
                fin: true,
                data: Vec::new()
            })
        );
        assert_eq!(read_frame(&mut server).await.unwrap(), Some(Frame::Ping(2)));
        // SYN_STREAM is a control frame the reader does not need to decode.
        assert_eq!(read_frame(&mut server).await.unwrap(), Some(Frame::Other));
        drop(w);
        assert_eq!(read_frame(&mut server).await.unwrap(), None);
    }

    #[test]
    fn header_blocks_are_one_zlib_stream_of_stored_blocks() {
        let mut w = Writer::new(tokio::io::sink());
        let first = w.header_block(&[("streamtype", "stdin")]);
        assert_eq!(&first[..2], &[0x78, 0x01]);
        // count + name + value: 4 + 4 + 10 + 4 + 5 = 27 bytes, stored.
        assert_eq!(&first[2..7], &[0x00, 27, 0, !27u8, 0xff]);
        assert_eq!(&first[first.len() - 5..], &[0, 0, 0, 0xff, 0xff]);
        let second = w.header_block(&[]);
        assert_eq!(second[0], 0x00, "no second zlib header");
    }
}

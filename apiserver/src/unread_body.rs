//! Request bodies a handler answered without reading (a 404 for a missing
//! resource, a 413 from the declared length, a refused authorization). Over
//! HTTP/2 a response sent while the client is still uploading ends the
//! stream with a reset, which clients report as a transport error instead
//! of the answer. So the listener wraps each body: when the handler drops
//! it unfinished, what is left is handed back, and the listener reads it
//! to its end (bounded in bytes and time) before it sends the response.
//!
//! It only reads and discards; it never looks at the bytes or changes the
//! response.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

/// The most bytes drained after the handler is done; a client sending more
/// gets its answer and the reset.
pub(crate) const DRAIN_LIMIT: u64 = 8 * 1024 * 1024;

/// How long draining may take.
pub(crate) const DRAIN_TIME: Duration = Duration::from_secs(10);

/// Where a dropped, unfinished body is left for the listener.
pub(crate) type Leftover = Arc<parking_lot::Mutex<Option<Incoming>>>;

/// A request body that leaves itself in `leftover` when dropped unfinished.
pub(crate) struct Tracked {
    inner: Option<Incoming>,
    leftover: Leftover,
}

impl Tracked {
    /// Wraps `body`; the caller keeps a clone of `leftover`.
    pub(crate) fn new(body: Incoming, leftover: Leftover) -> Self {
        Self {
            inner: Some(body),
            leftover,
        }
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match self.inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take()
            && !inner.is_end_stream()
        {
            *self.leftover.lock() = Some(inner);
        }
    }
}

/// Reads what is left of a body the handler dropped, up to [`DRAIN_LIMIT`]
/// bytes and [`DRAIN_TIME`]; returns whether it reached the end.
pub(crate) async fn drain(leftover: &Leftover) -> bool {
    let Some(mut body) = leftover.lock().take() else {
        return true;
    };
    let reading = async {
        let mut read = 0u64;
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let Ok(frame) = frame else {
                return false;
            };
            if let Some(data) = frame.data_ref() {
                read += data.len() as u64;
                if read > DRAIN_LIMIT {
                    return false;
                }
            }
        }
        true
    };
    tokio::time::timeout(DRAIN_TIME, reading)
        .await
        .unwrap_or(false)
}

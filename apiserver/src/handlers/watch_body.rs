//! A watch response's body, which runs its watcher: no task or channel of
//! its own, so an event costs a watcher one wake-up (of the connection's
//! task) rather than two, and frames waiting together go out as one chunk
//! (one TLS record, one write).
//!
//! Frames are not held back to gather more: under load they gather on
//! their own (the connection is polled again only when it has room), and a
//! timer per busy watcher to pace them was measured to cost more CPU than
//! the fewer, larger writes saved (docs/BENCHMARKS.md, issue #17).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;

use crate::watch_cache::Frame;

/// Frames a watcher may queue before it waits for its client.
const OUTBOX: usize = 64;

/// Bytes gathered into one chunk at most.
const CHUNK: usize = 64 * 1024;

/// Frames a watcher has produced and its response has not written yet.
/// Shared by the watcher (which fills it) and the body (which empties it);
/// both run in the connection's task, so the lock is never contended.
#[derive(Default)]
pub(super) struct Outbox {
    frames: Mutex<VecDeque<Frame>>,
}

impl Outbox {
    /// Queues a frame; when the outbox is full, waits for the body to take
    /// what is queued (the client reading), as a bounded channel would.
    pub(super) async fn send(&self, frame: impl Into<Frame>) {
        let full = {
            let mut frames = self.frames.lock();
            frames.push_back(frame.into());
            frames.len() >= OUTBOX
        };
        if full {
            YieldToBody(false).await;
        }
    }

    /// Everything queued, as one chunk (or `None` when nothing is).
    fn take_chunk(&self) -> Option<Bytes> {
        let mut frames = self.frames.lock();
        let first = frames.pop_front()?;
        if frames.is_empty() {
            return Some(first.into_bytes());
        }
        let mut chunk = BytesMut::with_capacity(first.len() * (frames.len() + 1));
        first.write_to(&mut chunk);
        while chunk.len() < CHUNK {
            let Some(next) = frames.pop_front() else {
                break;
            };
            next.write_to(&mut chunk);
        }
        Some(chunk.freeze())
    }
}

/// Pending once, without a waker: only the body polls its watcher, and
/// after the watcher is pending with frames queued it returns them and is
/// polled again when the client has room, so this resumes then.
struct YieldToBody(bool);

impl Future for YieldToBody {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        Poll::Pending
    }
}

/// The body stream of one watch: polls the watcher, writes what it queued.
/// The stream ends when the watcher does; dropping it (the client went
/// away) drops the watcher.
pub(super) struct WatchBody<W, G> {
    watcher: Option<Pin<Box<W>>>,
    outbox: Arc<Outbox>,
    /// Held as long as the watch runs (the watcher gauge).
    _guard: G,
}

impl<W, G> WatchBody<W, G>
where
    W: Future<Output = ()> + Send + 'static,
{
    /// The body for `watcher`, which queues its frames in `outbox`.
    pub(super) fn new(watcher: W, outbox: Arc<Outbox>, guard: G) -> Self {
        Self {
            watcher: Some(Box::pin(watcher)),
            outbox,
            _guard: guard,
        }
    }
}

impl<W, G> futures::Stream for WatchBody<W, G>
where
    W: Future<Output = ()> + Send + 'static,
    G: Unpin,
{
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(watcher) = this.watcher.as_mut()
            && watcher.as_mut().poll(cx).is_ready()
        {
            this.watcher = None;
        }
        match this.outbox.take_chunk() {
            Some(chunk) => Poll::Ready(Some(Ok(chunk))),
            None if this.watcher.is_none() => Poll::Ready(None),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use std::time::Duration;

    /// A watcher that queues `frames` numbered frames at once.
    async fn producer(outbox: Arc<Outbox>, frames: usize) {
        for i in 0..frames {
            outbox.send(Bytes::from(format!("{i}\n"))).await;
        }
    }

    async fn read_all(
        body: WatchBody<impl Future<Output = ()> + Send + 'static, ()>,
    ) -> Vec<Bytes> {
        body.map(|chunk| chunk.expect("infallible")).collect().await
    }

    fn lines(chunks: &[Bytes]) -> Vec<String> {
        let all: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        String::from_utf8(all)
            .expect("utf-8")
            .lines()
            .map(String::from)
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn every_frame_arrives_in_order_and_the_body_ends_with_its_watcher() {
        let outbox = Arc::new(Outbox::default());
        // More frames than the outbox holds, all at once: the watcher waits
        // for the body rather than dropping or blocking.
        let watcher = producer(outbox.clone(), 1000);
        let chunks = read_all(WatchBody::new(watcher, outbox, ())).await;
        let expected: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        assert_eq!(lines(&chunks), expected);
        assert!(
            chunks.len() < 1000,
            "frames waiting together share chunks ({} chunks)",
            chunks.len()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_goes_out_as_soon_as_it_is_queued() {
        let outbox = Arc::new(Outbox::default());
        let sent = Arc::new(Mutex::new(Vec::new()));
        let watcher = {
            let (outbox, sent) = (outbox.clone(), sent.clone());
            async move {
                for i in 0..5 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    sent.lock().push(tokio::time::Instant::now());
                    outbox.send(Bytes::from(format!("{i}\n"))).await;
                }
            }
        };
        let mut body = std::pin::pin!(WatchBody::new(watcher, outbox, ()));
        let mut arrived = Vec::new();
        while body.next().await.is_some() {
            arrived.push(tokio::time::Instant::now());
        }
        let sent = sent.lock().clone();
        assert_eq!(arrived.len(), 5, "one chunk per frame");
        assert_eq!(sent, arrived, "no frame is held back");
    }
}

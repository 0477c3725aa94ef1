//! The seats of one limited priority level and the fair queues in front of
//! them. A request takes a seat at once when one is free and nobody waits;
//! otherwise its flow is dealt a hand of `handSize` queues out of `queues`
//! (shuffle sharding: a hash of the flow picks the hand, so one heavy flow
//! crowds only its own hand and rarely all of another flow's) and it waits
//! in the shortest of them. A freed seat goes to the head of the next
//! non-empty queue in turn (round robin, which for requests of equal
//! cost is the fair order upstream's virtual-time queuing approximates).
//! A request whose chosen queue is full, a level of type Reject with no
//! free seat, or a wait past its limit is refused — the caller answers
//! 429. This module knows nothing about HTTP or the API objects.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// Queuing of a level whose limit response is `Queue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Queuing {
    /// The number of queues.
    pub queues: usize,
    /// How many queues a flow is dealt (shuffle sharding); it joins the shortest.
    pub hand_size: usize,
    /// Requests one queue holds before more are refused with 429.
    pub queue_length_limit: usize,
}

/// Why a request got no seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// Reject level without a free seat, or the flow's queue is full.
    #[error("no seat and no room to wait")]
    Full,
    /// The request waited in its queue longer than it may.
    #[error("waited too long in the queue")]
    TimedOut,
}

struct State {
    limit: usize,
    in_flight: usize,
    queues: Vec<VecDeque<oneshot::Sender<Seat>>>,
    /// The queue the next freed seat is offered to first.
    next: usize,
}

/// One limited priority level.
pub(crate) struct Level {
    queuing: Option<Queuing>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        f.debug_struct("Level")
            .field("queuing", &self.queuing)
            .field("limit", &state.limit)
            .field("in_flight", &state.in_flight)
            .finish()
    }
}

/// A seat held while a request runs; dropping it frees the seat.
#[derive(Debug)]
pub(crate) struct Seat {
    level: Arc<Level>,
    armed: bool,
}

impl Drop for Seat {
    fn drop(&mut self) {
        if self.armed {
            self.level.release();
        }
    }
}

impl Level {
    /// A level of `limit` seats (at least one), queuing as `queuing` says
    /// or rejecting at once when it is `None`.
    pub(crate) fn new(limit: usize, queuing: Option<Queuing>) -> Arc<Self> {
        let queues = queuing.map_or(0, |q| q.queues.max(1));
        Arc::new(Self {
            queuing,
            state: Mutex::new(State {
                limit: limit.max(1),
                in_flight: 0,
                queues: (0..queues).map(|_| VecDeque::new()).collect(),
                next: 0,
            }),
        })
    }

    /// The queuing this level was made with.
    pub(crate) fn queuing(&self) -> Option<Queuing> {
        self.queuing
    }

    /// Changes the number of seats (a configuration change), handing out
    /// any that became free.
    pub(crate) fn set_limit(self: &Arc<Self>, limit: usize) {
        let mut state = self.state.lock();
        state.limit = limit.max(1);
        self.dispatch(&mut state);
    }

    #[cfg(test)]
    /// Requests running now.
    pub(crate) fn in_flight(&self) -> usize {
        self.state.lock().in_flight
    }

    /// A seat for a request of the flow hashed to `flow`, waiting at most
    /// `wait` in its queue.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        flow: u64,
        wait: Duration,
    ) -> Result<Seat, Refusal> {
        let receiver = {
            let mut state = self.state.lock();
            let waiting = state.queues.iter().any(|q| !q.is_empty());
            if state.in_flight < state.limit && !waiting {
                state.in_flight += 1;
                return Ok(Seat {
                    level: self.clone(),
                    armed: true,
                });
            }
            let Some(queuing) = self.queuing else {
                return Err(Refusal::Full);
            };
            let hand = deal(flow, state.queues.len(), queuing.hand_size);
            for &i in &hand {
                state.queues[i].retain(|waiter| !waiter.is_closed());
            }
            let Some(&shortest) = hand.iter().min_by_key(|&&i| state.queues[i].len()) else {
                return Err(Refusal::Full);
            };
            if state.queues[shortest].len() >= queuing.queue_length_limit {
                return Err(Refusal::Full);
            }
            let (sender, receiver) = oneshot::channel();
            state.queues[shortest].push_back(sender);
            receiver
        };
        match tokio::time::timeout(wait, receiver).await {
            Ok(Ok(seat)) => Ok(seat),
            // Dropping the receiver here gives back a seat sent meanwhile.
            _ => Err(Refusal::TimedOut),
        }
    }

    fn release(self: &Arc<Self>) {
        let mut state = self.state.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        self.dispatch(&mut state);
    }

    /// Hands free seats to waiters, one queue after the other.
    fn dispatch(self: &Arc<Self>, state: &mut State) {
        let count = state.queues.len();
        let mut empty_in_a_row = 0;
        while state.in_flight < state.limit && count > 0 && empty_in_a_row < count {
            let index = state.next % count;
            state.next = (index + 1) % count;
            let Some(waiter) = state.queues[index].pop_front() else {
                empty_in_a_row += 1;
                continue;
            };
            empty_in_a_row = 0;
            state.in_flight += 1;
            let seat = Seat {
                level: self.clone(),
                armed: true,
            };
            if let Err(mut seat) = waiter.send(seat) {
                // The waiter gave up; the seat goes to the next one.
                seat.armed = false;
                state.in_flight -= 1;
            }
        }
    }
}

/// `hand_size` distinct queue indices out of `queues`, picked by `hash`
/// (the same flow always gets the same hand).
pub(crate) fn deal(hash: u64, queues: usize, hand_size: usize) -> Vec<usize> {
    let hand_size = hand_size.min(queues);
    let mut remaining = hash;
    let mut hand: Vec<usize> = Vec::with_capacity(hand_size);
    for drawn in 0..hand_size {
        let left = (queues - drawn) as u64;
        // A position among the cards not dealt yet ...
        let mut card = (remaining % left) as usize;
        remaining /= left;
        // ... turned into a queue index by skipping the dealt ones.
        let mut dealt: Vec<usize> = hand.clone();
        dealt.sort_unstable();
        for taken in dealt {
            if card >= taken {
                card += 1;
            }
        }
        hand.push(card);
    }
    hand
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(5);

    fn queuing(queues: usize, hand_size: usize, length: usize) -> Option<Queuing> {
        Some(Queuing {
            queues,
            hand_size,
            queue_length_limit: length,
        })
    }

    #[test]
    fn hands_are_distinct_stable_and_spread() {
        let mut seen = std::collections::HashSet::new();
        for flow in 0..2000u64 {
            let hash = flow.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let hand = deal(hash, 64, 6);
            assert_eq!(hand, deal(hash, 64, 6));
            let mut sorted = hand.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 6, "{hand:?}");
            assert!(hand.iter().all(|&q| q < 64));
            seen.insert(sorted);
        }
        // Flows rarely share a whole hand.
        assert!(seen.len() > 1990, "{}", seen.len());
        assert_eq!(deal(7, 3, 8).len(), 3);
    }

    #[tokio::test]
    async fn a_reject_level_refuses_at_once_when_its_seats_are_taken() {
        let level = Level::new(1, None);
        let seat = level.acquire(1, LONG).await.unwrap();
        assert_eq!(level.acquire(2, LONG).await.unwrap_err(), Refusal::Full);
        drop(seat);
        assert!(level.acquire(2, LONG).await.is_ok());
    }

    #[tokio::test]
    async fn a_full_queue_refuses_and_a_long_wait_times_out() {
        let level = Level::new(1, queuing(1, 1, 1));
        let _seat = level.acquire(1, LONG).await.unwrap();
        let waiting = {
            let level = level.clone();
            tokio::spawn(async move { level.acquire(1, Duration::from_millis(200)).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(level.acquire(1, LONG).await.unwrap_err(), Refusal::Full);
        assert_eq!(waiting.await.unwrap().unwrap_err(), Refusal::TimedOut);
        // The timed-out waiter's place is free again.
        let level2 = level.clone();
        let queued = tokio::spawn(async move { level2.acquire(1, LONG).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(_seat);
        let seat = queued.await.unwrap().unwrap();
        assert_eq!(level.in_flight(), 1);
        drop(seat);
        assert_eq!(level.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_light_flow_is_served_between_a_heavy_flows_requests() {
        // Two queues, one queue per flow: flow 0 queues many, flow 1 one.
        let level = Level::new(1, queuing(2, 1, 100));
        let heavy = (0..2u64).find(|&h| deal(h, 2, 1) == [0]).unwrap();
        let light = (0..2u64).find(|&h| deal(h, 2, 1) == [1]).unwrap();
        let first = level.acquire(heavy, LONG).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, flow) in [heavy, heavy, heavy, light].into_iter().enumerate() {
            let (level, order) = (level.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let seat = level.acquire(flow, LONG).await.unwrap();
                order.lock().push(i);
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(seat);
            }));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(first);
        for task in tasks {
            task.await.unwrap();
        }
        let order = order.lock().clone();
        let light_at = order.iter().position(|&i| i == 3).unwrap();
        assert!(
            light_at <= 1,
            "the light flow waited behind the heavy one: {order:?}"
        );
    }

    #[tokio::test]
    async fn raising_the_limit_admits_waiters() {
        let level = Level::new(1, queuing(4, 2, 10));
        let _held = level.acquire(1, LONG).await.unwrap();
        let level2 = level.clone();
        let waiter = tokio::spawn(async move { level2.acquire(2, LONG).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        level.set_limit(2);
        assert!(waiter.await.unwrap().is_ok());
    }
}

//! The bounded queue between the proxy and a thread that sends off the box (a
//! `[[syslog]]` receiver's, the OTLP exporter's), with the back-off that thread
//! waits out when its receiver is away.
//!
//! The proxy side only pushes, never waits: a full queue drops the item and
//! counts it. The sending thread looks at the front, sends, and removes what was
//! sent; what could not be sent stays at the front for the next try.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// A bounded queue with a "finish" flag.
#[derive(Debug)]
pub struct ShipQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    capacity: usize,
    dropped: AtomicU64,
}

#[derive(Debug)]
struct State<T> {
    items: VecDeque<T>,
    finishing: bool,
    /// Senders waiting in [`ShipQueue::front`]: a push wakes one only then (a
    /// wake-up is a system call, too dear to make for every line).
    waiting: usize,
}

impl<T> ShipQueue<T> {
    /// An empty queue holding at most `capacity` items.
    pub fn new(capacity: usize) -> ShipQueue<T> {
        ShipQueue {
            state: Mutex::new(State {
                items: VecDeque::new(),
                finishing: false,
                waiting: 0,
            }),
            ready: Condvar::new(),
            capacity,
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an item, or drops it (and counts it) when the queue is full; wakes the
    /// sender once `wake_at` items wait. Never waits.
    pub fn push(&self, item: T, wake_at: usize) {
        let mut s = self.lock();
        if s.items.len() >= self.capacity {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        s.items.push_back(item);
        let wake = s.waiting > 0 && s.items.len() >= wake_at;
        drop(s);
        if wake {
            self.ready.notify_one();
        }
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items dropped because the queue was full (or left when finishing failed).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Waits until at least `min` items wait, the queue finishes, or `timeout`
    /// (`None`: no limit) passes; then gives copies of the first `max` items and
    /// whether the queue is finishing.
    pub fn front(&self, min: usize, max: usize, timeout: Option<Duration>) -> (Vec<T>, bool)
    where
        T: Clone,
    {
        let mut s = self.lock();
        let enough = |s: &mut State<T>| s.items.len() < min.max(1) && !s.finishing;
        s.waiting += 1;
        let mut s = match timeout {
            Some(t) => {
                self.ready
                    .wait_timeout_while(s, t, enough)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => self
                .ready
                .wait_while(s, enough)
                .unwrap_or_else(|e| e.into_inner()),
        };
        s.waiting -= 1;
        (s.items.iter().take(max).cloned().collect(), s.finishing)
    }

    /// Removes the first `n` items (those just sent).
    pub fn remove_front(&self, n: usize) {
        let mut s = self.lock();
        let n = n.min(s.items.len());
        s.items.drain(..n);
    }

    /// Drops everything still waiting, counted as dropped (the sender gives up).
    pub fn drop_all(&self) {
        let mut s = self.lock();
        self.dropped
            .fetch_add(s.items.len() as u64, Ordering::Relaxed);
        s.items.clear();
    }

    /// Asks the sender to send what it can and stop.
    pub fn finish(&self) {
        self.lock().finishing = true;
        self.ready.notify_all();
    }

    /// Waits `d`, or less when the queue finishes meanwhile.
    pub fn pause(&self, d: Duration) {
        let s = self.lock();
        let _ = self
            .ready
            .wait_timeout_while(s, d, |s| !s.finishing)
            .unwrap_or_else(|e| e.into_inner());
    }
}

/// A growing wait between tries: 0.5 s, doubled after each failure, at most 5 s.
/// A longer cap would keep dropping for that long after the receiver is back
/// (while the queue is full), and one attempt every 5 s costs nothing.
#[derive(Debug, Clone, Copy)]
pub struct Backoff(Duration);

impl Backoff {
    /// The first wait.
    pub const FIRST: Duration = Duration::from_millis(500);
    /// The longest wait.
    pub const MAX: Duration = Duration::from_secs(5);

    /// A back-off at its first wait.
    pub fn new() -> Backoff {
        Backoff(Self::FIRST)
    }

    /// Back to the first wait (after a success).
    pub fn reset(&mut self) {
        self.0 = Self::FIRST;
    }

    /// Whether no failure happened since the last success.
    pub fn is_first(&self) -> bool {
        self.0 == Self::FIRST
    }

    /// The wait to do now; the next one is twice as long.
    pub fn next_wait(&mut self) -> Duration {
        let d = self.0;
        self.0 = (self.0 * 2).min(Self::MAX);
        d
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts() {
        let q = ShipQueue::new(2);
        for i in 0..5 {
            q.push(i, 1);
        }
        assert_eq!((q.len(), q.dropped()), (2, 3));
        let (front, finishing) = q.front(1, 10, Some(Duration::ZERO));
        assert_eq!((front, finishing), (vec![0, 1], false));
        q.remove_front(1);
        assert_eq!(q.front(1, 10, Some(Duration::ZERO)).0, vec![1]);
        q.finish();
        assert!(q.front(5, 10, None).1, "finishing ends the wait");
        q.drop_all();
        assert_eq!((q.len(), q.dropped()), (0, 4));
        q.pause(Duration::from_secs(3600)); // returns at once: finishing
    }

    #[test]
    fn the_back_off_doubles_up_to_its_bound() {
        let mut b = Backoff::new();
        assert!(b.is_first());
        let waits: Vec<_> = (0..9).map(|_| b.next_wait().as_millis()).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 5000, 5000, 5000, 5000, 5000]);
        b.reset();
        assert!(b.is_first());
    }
}

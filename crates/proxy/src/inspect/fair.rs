//! The inspection pool's admission: a fixed number of slots handed out fairly
//! between clients.
//!
//! A first-come queue lets one client that sends many large bodies at once
//! take every place ahead of everyone else: another client's body would wait
//! for all of them. Here each client (its address) has a queue of its own, and
//! a freed slot goes to the waiting client that has used the pool least lately
//! (its pool time, halved every [`HALF_LIFE`]), to that client's oldest waiter;
//! among equals, to the one that has waited longest. A client that floods the
//! pool has used it most, so any other client's job goes first at the next
//! free slot; and since phases on the pool are walked in slices
//! (`exchange/record.rs`), a slot frees every few milliseconds. An IPv6 client
//! is its /64 (one host commonly holds a whole /64).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How fast a client's past use of the pool is forgotten: halved every so long.
pub const HALF_LIFE: Duration = Duration::from_secs(2);

/// Clients whose use is remembered, beyond which the forgotten ones (used less
/// than a microsecond's worth now) are dropped, and if that is not enough, all
/// but the waiting ones.
const REMEMBERED: usize = 4096;

/// Slots handed out between clients; see the module documentation.
#[derive(Debug)]
pub struct FairSlots {
    state: Mutex<State>,
    /// How many wait, read without the lock ([`FairSlots::contended`]).
    waiters: AtomicUsize,
}

#[derive(Debug)]
struct State {
    /// Slots no one holds.
    free: usize,
    /// The clients that wait.
    waiting: HashMap<IpAddr, Waiting>,
    /// Each client's recent use of the pool.
    usage: HashMap<IpAddr, Usage>,
    /// Arrival order, for ties.
    seq: u64,
}

/// One client's waiters.
#[derive(Debug)]
struct Waiting {
    /// Oldest first.
    queue: VecDeque<oneshot::Sender<Slot>>,
    /// When its next waiter began to wait (an arrival number).
    since: u64,
}

/// A client's use of the pool: seconds, decayed, as of `at`.
#[derive(Debug, Clone, Copy)]
struct Usage {
    used: f64,
    at: Instant,
}

impl Usage {
    fn now(&self, now: Instant) -> f64 {
        let age = now.saturating_duration_since(self.at).as_secs_f64();
        self.used * 0.5f64.powf(age / HALF_LIFE.as_secs_f64())
    }
}

/// A held slot: given back when dropped (to the next waiter), its time
/// counted to its client.
#[derive(Debug)]
pub struct Slot {
    /// `None` only for a slot being handed on (see [`FairSlots::release`]).
    slots: Option<Arc<FairSlots>>,
    client: IpAddr,
    since: Instant,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            FairSlots::release(&slots, self.client, self.since.elapsed());
        }
    }
}

impl FairSlots {
    /// `n` slots.
    pub fn new(n: usize) -> Arc<FairSlots> {
        Arc::new(FairSlots {
            state: Mutex::new(State {
                free: n,
                waiting: HashMap::new(),
                usage: HashMap::new(),
                seq: 0,
            }),
            waiters: AtomicUsize::new(0),
        })
    }

    /// Whether someone waits for a slot now: only then is a long evaluation
    /// walked in slices.
    pub fn contended(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }

    /// Whether a client other than `client` waits for a slot now: only then
    /// does `client`'s walk give its slot back at the end of a slice. Its own
    /// waiting jobs gain nothing from taking turns with it, and giving the slot
    /// back is a round trip through the pool.
    pub fn contended_for(&self, client: IpAddr) -> bool {
        if self.waiters.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let key = turn_key(client);
        self.lock().waiting.keys().any(|c| *c != key)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for `client`: at once when one is free and no one waits, else
    /// when its turn comes.
    pub async fn acquire(self: &Arc<Self>, client: IpAddr) -> Slot {
        let client = turn_key(client);
        let rx = {
            let mut st = self.lock();
            if st.free > 0 && st.waiting.is_empty() {
                st.free -= 1;
                return Slot {
                    slots: Some(Arc::clone(self)),
                    client,
                    since: Instant::now(),
                };
            }
            let (tx, rx) = oneshot::channel();
            st.seq += 1;
            let since = st.seq;
            st.waiting
                .entry(client)
                .or_insert_with(|| Waiting {
                    queue: VecDeque::new(),
                    since,
                })
                .queue
                .push_back(tx);
            self.waiters.fetch_add(1, Ordering::Relaxed);
            rx
        };
        match rx.await {
            Ok(slot) => slot,
            // The sender is dropped only with the slots, which `self` keeps alive.
            Err(_) => unreachable!("FairSlots dropped a waiter"),
        }
    }

    /// Gives back a slot `client` held for `held`: to the oldest waiter of the
    /// waiting client that used the pool least, or to the free count when no one
    /// waits. A waiter that gave up (its future dropped) is skipped.
    fn release(this: &Arc<Self>, client: IpAddr, held: Duration) {
        let now = Instant::now();
        let mut st = this.lock();
        let used = st.usage.get(&client).map_or(0.0, |u| u.now(now)) + held.as_secs_f64();
        st.usage.insert(client, Usage { used, at: now });
        if st.usage.len() > REMEMBERED {
            st.usage.retain(|_, u| u.now(now) > 1e-6);
            if st.usage.len() > REMEMBERED {
                // Too many clients at once to remember them all: only the
                // waiting ones keep their use (the map stays bounded, and the
                // next pruning is far off again).
                let State { usage, waiting, .. } = &mut *st;
                usage.retain(|c, _| waiting.contains_key(c));
            }
        }
        loop {
            let next = {
                let usage = &st.usage;
                st.waiting
                    .iter()
                    .map(|(c, w)| {
                        let used = usage.get(c).map_or(0.0, |u| u.now(now));
                        (*c, used, w.since)
                    })
                    .min_by(|a, b| a.1.total_cmp(&b.1).then(a.2.cmp(&b.2)))
                    .map(|(c, _, _)| c)
            };
            let Some(next) = next else { break };
            st.seq += 1;
            let seq = st.seq;
            let Some(w) = st.waiting.get_mut(&next) else {
                break;
            };
            let tx = w.queue.pop_front();
            if tx.is_some() {
                this.waiters.fetch_sub(1, Ordering::Relaxed);
            }
            w.since = seq;
            if w.queue.is_empty() {
                st.waiting.remove(&next);
            }
            let Some(tx) = tx else { continue };
            let slot = Slot {
                slots: Some(Arc::clone(this)),
                client: next,
                since: Instant::now(),
            };
            match tx.send(slot) {
                Ok(()) => return,
                Err(mut slot) => {
                    // Its waiter is gone: the slot goes on to the next one,
                    // not released (which would lock again).
                    slot.slots = None;
                }
            }
        }
        st.free += 1;
    }

    /// How many slots are free and how many waiters there are (for tests).
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let st = self.lock();
        (st.free, st.waiting.values().map(|w| w.queue.len()).sum())
    }
}

/// Whose turn a client's jobs take: its IPv4 address, or its IPv6 /64.
fn turn_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mut o = v6.octets();
            o[8..].fill(0);
            IpAddr::from(o)
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    /// Client 1 holds the slot and queues five jobs, then client 2 one: client 2,
    /// which has used the pool least, goes first.
    #[tokio::test]
    async fn the_client_that_used_the_pool_least_goes_first() {
        let slots = FairSlots::new(1);
        let held = slots.acquire(ip(1)).await;
        // Client 1 queues five jobs, then client 2 one.
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (client, label) in [
            (1, "a1"),
            (1, "a2"),
            (1, "a3"),
            (1, "a4"),
            (1, "a5"),
            (2, "b1"),
        ] {
            let (mine, order) = (Arc::clone(&slots), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let _slot = mine.acquire(ip(client)).await;
                order.lock().unwrap().push(label);
                tokio::task::yield_now().await;
            }));
            // Each waiter is queued before the next one is spawned.
            while slots.counts().1 < tasks.len() {
                tokio::task::yield_now().await;
            }
        }
        // Client 1's evaluations are sliced (client 2 waits); client 2's would
        // be too (client 1 waits), and a third client's.
        assert!(slots.contended());
        assert!(slots.contended_for(ip(1)));
        assert!(slots.contended_for(ip(2)));
        assert!(slots.contended_for(ip(3)));
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert!(!slots.contended());
        assert!(!slots.contended_for(ip(1)));
        let order = order.lock().unwrap().clone();
        // Client 2's job comes first, not after client 1's whole backlog.
        assert_eq!(order, ["b1", "a1", "a2", "a3", "a4", "a5"]);
        assert_eq!(slots.counts(), (1, 0));
    }

    /// Only one client waits: its own walk keeps its slot at the end of a
    /// slice, another client's gives it back.
    #[tokio::test]
    async fn a_client_is_not_sliced_for_its_own_waiters() {
        let slots = FairSlots::new(1);
        let held = slots.acquire(ip(1)).await;
        let mine = Arc::clone(&slots);
        let waiter = tokio::spawn(async move {
            let _slot = mine.acquire(ip(1)).await;
        });
        while slots.counts().1 < 1 {
            tokio::task::yield_now().await;
        }
        assert!(slots.contended());
        assert!(!slots.contended_for(ip(1)));
        assert!(slots.contended_for(ip(2)));
        drop(held);
        waiter.await.unwrap();
        assert!(!slots.contended_for(ip(2)));
    }

    /// Many clients, one after another: the memory of their use stays bounded.
    #[tokio::test]
    async fn the_memory_of_clients_is_bounded() {
        let slots = FairSlots::new(1);
        for n in 0..(2 * REMEMBERED as u32) {
            let client = IpAddr::from(n.to_be_bytes());
            let slot = slots.acquire(client).await;
            // Held long enough to be remembered beyond the first pruning.
            std::thread::sleep(Duration::from_micros(20));
            drop(slot);
        }
        let st = slots.lock();
        assert!(st.usage.len() <= REMEMBERED + 1, "{}", st.usage.len());
        assert_eq!(st.free, 1);
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(turn_key(a), turn_key(b));
        assert_ne!(turn_key(a), turn_key(c));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(turn_key(mapped), ip(1));
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_loses_no_slot() {
        let slots = FairSlots::new(1);
        let held = slots.acquire(ip(1)).await;
        let gone = {
            let slots = Arc::clone(&slots);
            tokio::spawn(async move { slots.acquire(ip(2)).await })
        };
        while slots.counts().1 < 1 {
            tokio::task::yield_now().await;
        }
        gone.abort();
        let _ = gone.await;
        drop(held);
        assert_eq!(slots.counts(), (1, 0));
        // And the slot is there to be taken again.
        let again = tokio::time::timeout(Duration::from_secs(5), slots.acquire(ip(3))).await;
        assert!(again.is_ok());
    }
}

//! The inspection pool's admission: a fixed number of slots handed out fairly
//! between clients.
//!
//! A first-come queue lets one client that sends many large bodies at once
//! take every place ahead of everyone else: another client's body would wait
//! for all of them. Here each client (its address) has a queue of its own, and
//! a freed slot goes to the next client in turn (round robin over the clients
//! that wait), to that client's oldest waiter. A client's body then waits for at
//! most one evaluation of each other waiting client, not for their whole
//! backlog. An IPv6 client is its /64 (one host commonly holds a whole /64).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// Slots handed out in turn between clients; see the module documentation.
#[derive(Debug)]
pub struct FairSlots {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Slots no one holds.
    free: usize,
    /// The waiters of each client, oldest first.
    waiting: HashMap<IpAddr, VecDeque<oneshot::Sender<Slot>>>,
    /// The clients that wait, in the order they get their next slot.
    turn: VecDeque<IpAddr>,
}

/// A held slot: given back when dropped (to the next waiter in turn).
#[derive(Debug)]
pub struct Slot {
    /// `None` only for a slot being handed on (see [`FairSlots::release`]).
    slots: Option<Arc<FairSlots>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            FairSlots::release(&slots);
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
                turn: VecDeque::new(),
            }),
        })
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
            if st.free > 0 && st.turn.is_empty() {
                st.free -= 1;
                return Slot {
                    slots: Some(Arc::clone(self)),
                };
            }
            let (tx, rx) = oneshot::channel();
            let queue = st.waiting.entry(client).or_default();
            let first = queue.is_empty();
            queue.push_back(tx);
            if first {
                st.turn.push_back(client);
            }
            rx
        };
        match rx.await {
            Ok(slot) => slot,
            // The sender is dropped only with the slots, which `self` keeps alive.
            Err(_) => unreachable!("FairSlots dropped a waiter"),
        }
    }

    /// Gives a slot back: to the oldest waiter of the next client in turn, or
    /// to the free count when no one waits. A waiter that gave up (its future
    /// dropped) is skipped; a slot it was handed and never took comes back here
    /// when the channel drops it.
    fn release(this: &Arc<Self>) {
        let mut st = this.lock();
        while let Some(client) = st.turn.pop_front() {
            let Some(queue) = st.waiting.get_mut(&client) else {
                continue;
            };
            let next = queue.pop_front();
            if queue.is_empty() {
                st.waiting.remove(&client);
            } else {
                st.turn.push_back(client);
            }
            let Some(tx) = next else { continue };
            let slot = Slot {
                slots: Some(Arc::clone(this)),
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
        (st.free, st.waiting.values().map(VecDeque::len).sum())
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

    #[tokio::test]
    async fn slots_go_round_robin_between_clients() {
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
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        // Client 2's job comes second, not after client 1's whole backlog.
        assert_eq!(order, ["a1", "b1", "a2", "a3", "a4", "a5"]);
        assert_eq!(slots.counts(), (1, 0));
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

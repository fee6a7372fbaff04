//! Connection slots: `limits.connections`, and what happens when they run out.
//!
//! Every client connection holds a slot ([`ConnectionSlot`]) from the moment it is accepted
//! until it closes. While it holds one without a request in progress (its TLS
//! handshake, its request head, or an idle keep-alive wait) it is *waiting*, and a
//! waiting connection can be **reclaimed**: asked to close so that its slot serves
//! a new client. Without that, a client that opens connections and sends nothing,
//! or half a head, holds every slot until the header timeout ends them, and every
//! other client waits in the kernel's backlog meanwhile.
//!
//! - When a new connection finds no free slot, the accept loop reclaims the oldest
//!   waiting connections (those that began their wait first, at least
//!   [`RECLAIM_MIN_WAIT`] ago), a few at a time, and the new connection takes a
//!   freed slot; when none has waited that long yet, it looks again as they age.
//!   Connections with a request in progress
//!   (reading a body, waiting for the upstream, sending a response) are never
//!   reclaimed: their own time limits apply.
//! - **Pressure**: while more than [`PRESSURE_PERCENT`] percent of the slots are
//!   taken, a connection may wait at most `server.client_header_timeout_under_pressure`
//!   (handshake, head and keep-alive waits alike); a sweep once per
//!   [`SWEEP_INTERVAL`] reclaims those that waited longer.
//!
//! A waiting connection and the reclaimer race for the same slot through one
//! atomic state: the connection leaves its wait with a compare-and-swap to busy,
//! the reclaimer with a compare-and-swap to reclaimed; whichever wins decides, so
//! a connection is never closed once its request is under way.
//!
//! [`PerIp`] counts the open connections of each client address, for
//! `limits.connections_per_ip`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The share of slots taken, in percent, above which the pressure timeout applies.
pub const PRESSURE_PERCENT: usize = 80;

/// How often the pressure sweep looks for connections waiting too long.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(500);

/// How long a connection must have waited before a new connection may take its
/// slot: a client that has just connected (or just been answered) has this long to
/// send its head, so a flood of new connections cannot push out each other or the
/// normal clients among them, while connections that sit silent are fair game.
pub const RECLAIM_MIN_WAIT: Duration = Duration::from_millis(500);

/// The most waiting connections reclaimed at once when a new connection finds no
/// free slot (the scan for the oldest is over every slot, so it is done once for
/// a batch of new connections, as nginx drains up to 32 reusable ones at a time).
const RECLAIM_BATCH: usize = 16;

/// What a connection holding a slot is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Wait {
    /// Its TLS handshake.
    Handshake = 1,
    /// Its request head: nothing or part of it has arrived.
    Head = 2,
    /// Idle between two requests (keep-alive).
    Idle = 3,
}

const BUSY: u8 = 0;
const RECLAIMED: u8 = 4;

impl Wait {
    /// The label in metrics and logs.
    pub fn label(self) -> &'static str {
        match self {
            Wait::Handshake => "handshake",
            Wait::Head => "head",
            Wait::Idle => "idle",
        }
    }

    fn from_u8(v: u8) -> Option<Wait> {
        match v {
            1 => Some(Wait::Handshake),
            2 => Some(Wait::Head),
            3 => Some(Wait::Idle),
            _ => None,
        }
    }
}

/// Connections reclaimed so far, by what they were waiting for.
#[derive(Debug, Default)]
pub struct Reclaimed {
    /// Reclaimed because a new connection found no free slot.
    pub for_new: [AtomicU64; 3],
    /// Reclaimed by the pressure sweep (waited past the pressure timeout).
    pub by_sweep: [AtomicU64; 3],
}

impl Reclaimed {
    fn count(&self, sweep: bool, wait: Wait) {
        let i = wait as usize - 1;
        let c = if sweep {
            &self.by_sweep[i]
        } else {
            &self.for_new[i]
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// The state of one connection's slot, shared by the connection and the reclaimer.
#[derive(Debug)]
struct State {
    /// [`BUSY`], a [`Wait`], or [`RECLAIMED`].
    state: AtomicU8,
    /// When the current wait began, in milliseconds since the slots' epoch.
    since_ms: AtomicU64,
    /// Woken once the slot is reclaimed.
    notify: Notify,
}

/// `limits.connections` slots for the whole process (every worker and listener).
#[derive(Debug)]
pub struct ConnectionSlots {
    permits: Arc<Semaphore>,
    total: usize,
    epoch: Instant,
    next_id: AtomicU64,
    /// Every connection holding a slot, by id.
    open: Mutex<HashMap<u64, Arc<State>>>,
    pressure_timeout: Duration,
    /// Connections reclaimed, for the metrics.
    pub reclaimed: Reclaimed,
}

impl ConnectionSlots {
    /// `total` slots; a connection waits at most `pressure_timeout` under pressure.
    pub fn new(total: usize, pressure_timeout: Duration) -> Arc<ConnectionSlots> {
        Arc::new(ConnectionSlots {
            permits: Arc::new(Semaphore::new(total)),
            total,
            epoch: Instant::now(),
            next_id: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
            pressure_timeout,
            reclaimed: Reclaimed::default(),
        })
    }

    /// Slots taken now.
    pub fn in_use(&self) -> usize {
        self.total.saturating_sub(self.permits.available_permits())
    }

    /// Whether more than [`PRESSURE_PERCENT`] percent of the slots are taken.
    pub fn under_pressure(&self) -> bool {
        self.in_use() * 100 > self.total * PRESSURE_PERCENT
    }

    /// A slot for a connection just accepted, which begins `wait`. When none is
    /// free, the oldest waiting connections are reclaimed first; `None` when the
    /// semaphore is closed (never, in practice).
    pub async fn take(self: &Arc<Self>, wait: Wait) -> Option<ConnectionSlot> {
        let permit = loop {
            match self.permits.clone().try_acquire_owned() {
                Ok(p) => break p,
                Err(tokio::sync::TryAcquireError::Closed) => return None,
                Err(tokio::sync::TryAcquireError::NoPermits) => {}
            }
            self.reclaim_oldest(RECLAIM_BATCH, RECLAIM_MIN_WAIT);
            // A freed slot, or another look once more connections are old enough.
            tokio::select! {
                p = self.permits.clone().acquire_owned() => break p.ok()?,
                () = tokio::time::sleep(RECLAIM_MIN_WAIT / 5) => {}
            }
        };
        Some(self.register(permit, wait))
    }

    fn register(self: &Arc<Self>, permit: OwnedSemaphorePermit, wait: Wait) -> ConnectionSlot {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(State {
            state: AtomicU8::new(wait as u8),
            since_ms: AtomicU64::new(self.now_ms()),
            notify: Notify::new(),
        });
        lock(&self.open).insert(id, state.clone());
        ConnectionSlot {
            handle: SlotHandle {
                slots: self.clone(),
                state,
            },
            id,
            _permit: permit,
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Reclaims up to `n` connections that have waited at least `min_wait`, the
    /// oldest waits first; returns how many.
    pub fn reclaim_oldest(&self, n: usize, min_wait: Duration) -> usize {
        let min_wait = u64::try_from(min_wait.as_millis()).unwrap_or(u64::MAX);
        let now = self.now_ms();
        let mut waiting: Vec<(u64, Arc<State>)> = lock(&self.open)
            .values()
            .filter(|s| Wait::from_u8(s.state.load(Ordering::Acquire)).is_some())
            .map(|s| (s.since_ms.load(Ordering::Relaxed), s.clone()))
            .filter(|(since, _)| now.saturating_sub(*since) >= min_wait)
            .collect();
        if waiting.len() > n {
            waiting.select_nth_unstable_by_key(n, |(since, _)| *since);
            waiting.truncate(n);
        }
        waiting
            .iter()
            .filter(|(_, s)| self.reclaim(s, false))
            .count()
    }

    /// The pressure sweep: while under pressure, reclaims every connection that
    /// has waited longer than the pressure timeout; returns how many.
    pub fn sweep(&self) -> usize {
        if !self.under_pressure() {
            return 0;
        }
        let limit = u64::try_from(self.pressure_timeout.as_millis()).unwrap_or(u64::MAX);
        let now = self.now_ms();
        let stale: Vec<Arc<State>> = lock(&self.open)
            .values()
            .filter(|s| {
                Wait::from_u8(s.state.load(Ordering::Acquire)).is_some()
                    && now.saturating_sub(s.since_ms.load(Ordering::Relaxed)) > limit
            })
            .cloned()
            .collect();
        stale.iter().filter(|s| self.reclaim(s, true)).count()
    }

    /// Moves a waiting slot to reclaimed and wakes its connection; false when the
    /// connection got busy (or was reclaimed) first.
    fn reclaim(&self, s: &State, sweep: bool) -> bool {
        let current = s.state.load(Ordering::Acquire);
        let Some(wait) = Wait::from_u8(current) else {
            return false;
        };
        if s.state
            .compare_exchange(current, RECLAIMED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        self.reclaimed.count(sweep, wait);
        s.notify.notify_one();
        true
    }
}

impl ConnectionSlots {
    /// Appends the slots' metrics to a Prometheus text: slots in use and in all,
    /// and connections reclaimed, by reason and by what they waited for.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "# HELP palisade_connection_slots_in_use Client connections holding one of limits.connections.\n# TYPE palisade_connection_slots_in_use gauge\npalisade_connection_slots_in_use {}",
            self.in_use()
        );
        let _ = writeln!(
            out,
            "# HELP palisade_connection_slots Client connections allowed at once (limits.connections).\n# TYPE palisade_connection_slots gauge\npalisade_connection_slots {}",
            self.total
        );
        let _ = writeln!(
            out,
            "# HELP palisade_connections_reclaimed_total Connections closed while waiting for a handshake, a request head or their next request, to free their slot: for a new connection when none was free, or by the pressure sweep.\n# TYPE palisade_connections_reclaimed_total counter"
        );
        for (reason, counts) in [
            ("new_connection", &self.reclaimed.for_new),
            ("pressure", &self.reclaimed.by_sweep),
        ] {
            for wait in [Wait::Handshake, Wait::Head, Wait::Idle] {
                let _ = writeln!(
                    out,
                    "palisade_connections_reclaimed_total{{reason=\"{reason}\",wait=\"{}\"}} {}",
                    wait.label(),
                    counts[wait as usize - 1].load(Ordering::Relaxed)
                );
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One connection's slot: held until the connection closes (dropping it frees the
/// slot). Its state is read and changed through the [`SlotHandle`] it derefs to.
#[derive(Debug)]
pub struct ConnectionSlot {
    handle: SlotHandle,
    id: u64,
    _permit: OwnedSemaphorePermit,
}

impl std::ops::Deref for ConnectionSlot {
    type Target = SlotHandle;

    fn deref(&self) -> &SlotHandle {
        &self.handle
    }
}

/// The state of a connection's slot, without the slot: what a part of the
/// connection that must outlive a borrow (the tasks hyper spawns for the streams
/// of an HTTP/2 connection, and the connection's own bookkeeping of them) needs to
/// mark the connection waiting or busy and to learn that it was reclaimed. A
/// clone does not hold the slot: the [`ConnectionSlot`] it came from does, and
/// frees it when dropped.
#[derive(Debug, Clone)]
pub struct SlotHandle {
    slots: Arc<ConnectionSlots>,
    state: Arc<State>,
}

impl SlotHandle {
    /// A handle of its own, busy, that no reclaimer knows of (it is not among
    /// the open slots): for a part of a connection that serves requests of its
    /// own beside the connection's other streams (an inspected tunnel opened by
    /// an HTTP/2 `CONNECT`), whose waits must not make the whole connection
    /// reclaimable. It is never reclaimed; the connection's own slot stays busy
    /// while the part runs.
    pub fn detached(&self) -> SlotHandle {
        SlotHandle {
            slots: Arc::clone(&self.slots),
            state: Arc::new(State {
                state: AtomicU8::new(BUSY),
                since_ms: AtomicU64::new(self.slots.now_ms()),
                notify: Notify::new(),
            }),
        }
    }

    /// The connection begins to wait (for its head, or idle between requests):
    /// from now on it may be reclaimed. Does nothing once it has been reclaimed.
    pub fn wait(&self, wait: Wait) {
        let s = &self.state;
        s.since_ms.store(self.slots.now_ms(), Ordering::Relaxed);
        let mut current = s.state.load(Ordering::Acquire);
        while current != RECLAIMED {
            match s.state.compare_exchange_weak(
                current,
                wait as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => current = now,
            }
        }
    }

    /// The connection's wait is over (a request head is complete, or the handshake
    /// done): it is busy and can no longer be reclaimed. False when it was
    /// reclaimed first: the connection must close.
    pub fn busy(&self) -> bool {
        let s = &self.state;
        loop {
            let current = s.state.load(Ordering::Acquire);
            if current == RECLAIMED {
                return false;
            }
            if current == BUSY
                || s.state
                    .compare_exchange(current, BUSY, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                return true;
            }
        }
    }

    /// Completes once the slot has been reclaimed. Cancel-safe: a notification
    /// that came while nobody waited is kept for the next call.
    pub async fn reclaimed(&self) {
        if self.state.state.load(Ordering::Acquire) == RECLAIMED {
            return;
        }
        self.state.notify.notified().await;
    }

    /// Whether the slots are under pressure now.
    pub fn under_pressure(&self) -> bool {
        self.slots.under_pressure()
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        lock(&self.handle.slots.open).remove(&self.id);
    }
}

/// Open client connections per IP address, for `limits.connections_per_ip`.
#[derive(Debug)]
pub struct PerIp {
    /// The limit in force (a reload may change it for new connections).
    limit: std::sync::atomic::AtomicUsize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerIp {
    /// Counts connections against `limit` per address; 0 means no limit.
    pub fn new(limit: usize) -> Arc<PerIp> {
        Arc::new(PerIp {
            limit: std::sync::atomic::AtomicUsize::new(limit),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// Counts a new connection from `ip`; `None` when `ip` already has `limit`
    /// open. The connection is counted until the guard is dropped.
    pub fn enter(self: &Arc<Self>, ip: IpAddr) -> Option<PerIpGuard> {
        let limit = self.limit.load(Ordering::Relaxed);
        if limit == 0 {
            return Some(PerIpGuard { owner: None, ip });
        }
        // IPv4 clients on a dual-stack socket arrive as IPv4-mapped IPv6.
        let ip = ip.to_canonical();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= limit {
            return None;
        }
        *n += 1;
        Some(PerIpGuard {
            owner: Some(self.clone()),
            ip,
        })
    }

    /// Changes the limit for the connections counted from now on (a reload); the
    /// connections open stay counted. 0 means no limit.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Addresses with at least one connection open.
    pub fn addresses(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// One connection counted by [`PerIp`]; dropping it uncounts the connection.
#[derive(Debug)]
pub struct PerIpGuard {
    owner: Option<Arc<PerIp>>,
    ip: IpAddr,
}

impl Drop for PerIpGuard {
    fn drop(&mut self) {
        let Some(owner) = &self.owner else {
            return;
        };
        let mut open = owner.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                // Forget addresses without connections: memory stays bounded by the
                // connections open, not by every client ever seen.
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_new_connection_reclaims_the_oldest_waiting_ones() {
        rt().block_on(async {
            let slots = ConnectionSlots::new(RECLAIM_BATCH + 2, Duration::from_secs(5));
            let busy = slots.take(Wait::Head).await.unwrap();
            assert!(busy.busy());
            let mut waiting = Vec::new();
            for i in 0..=RECLAIM_BATCH {
                let wait = if i % 2 == 0 { Wait::Head } else { Wait::Idle };
                waiting.push(slots.take(wait).await.unwrap());
                std::thread::sleep(Duration::from_millis(2));
            }
            assert_eq!(slots.in_use(), RECLAIM_BATCH + 2);
            // A new connection: the oldest RECLAIM_BATCH waiting ones go, not the
            // busy one (which began first but has a request in progress), nor the
            // newest waiting one.
            let newest = waiting.pop().unwrap();
            let (new, ()) = tokio::join!(slots.take(Wait::Head), async {
                for w in waiting.drain(..) {
                    w.reclaimed().await;
                    assert!(!w.busy(), "a reclaimed slot cannot turn busy");
                }
            });
            let new = new.unwrap();
            let count =
                |c: &[AtomicU64; 3]| c.iter().map(|n| n.load(Ordering::Relaxed)).sum::<u64>();
            assert_eq!(count(&slots.reclaimed.for_new) as usize, RECLAIM_BATCH);
            assert_eq!(count(&slots.reclaimed.by_sweep), 0);
            assert!(busy.busy());
            assert!(newest.busy(), "the newest waiting one stayed");
            assert!(new.busy());
        });
    }

    #[test]
    fn a_detached_handle_waits_without_making_its_connection_reclaimable() {
        rt().block_on(async {
            let slots = ConnectionSlots::new(2, Duration::from_secs(5));
            let a = slots.take(Wait::Head).await.unwrap();
            assert!(a.busy());
            let part = a.detached();
            part.wait(Wait::Idle);
            assert_eq!(slots.reclaim_oldest(1, Duration::ZERO), 0);
            assert!(a.busy(), "the connection's own state is untouched");
            assert!(part.busy());
            assert_eq!(slots.in_use(), 1, "a detached handle takes no slot");
        });
    }

    #[test]
    fn a_connection_that_got_busy_first_is_not_reclaimed() {
        rt().block_on(async {
            let slots = ConnectionSlots::new(2, Duration::from_secs(5));
            let a = slots.take(Wait::Head).await.unwrap();
            // Just connected: it has RECLAIM_MIN_WAIT to send its head.
            assert_eq!(slots.reclaim_oldest(1, RECLAIM_MIN_WAIT), 0);
            assert!(a.busy());
            assert_eq!(slots.reclaim_oldest(1, Duration::ZERO), 0);
            // Waiting again (keep-alive) makes it reclaimable again.
            a.wait(Wait::Idle);
            assert_eq!(slots.reclaim_oldest(1, Duration::ZERO), 1);
            a.reclaimed().await;
            // Once reclaimed, a later wait does not revive it.
            a.wait(Wait::Idle);
            assert!(!a.busy());
        });
    }

    #[test]
    fn the_sweep_applies_the_pressure_timeout_only_under_pressure() {
        rt().block_on(async {
            let slots = ConnectionSlots::new(10, Duration::from_millis(1));
            let few: Vec<ConnectionSlot> = futures_take(&slots, 8).await;
            std::thread::sleep(Duration::from_millis(5));
            assert!(!slots.under_pressure(), "8 of 10 is not over 80%");
            assert_eq!(slots.sweep(), 0);
            let more = slots.take(Wait::Idle).await.unwrap();
            assert!(more.busy());
            assert!(slots.under_pressure());
            assert_eq!(
                slots.sweep(),
                8,
                "every waiting connection past the timeout"
            );
            assert!(more.busy(), "the busy one stays");
            assert_eq!(
                slots.reclaimed.by_sweep[Wait::Handshake as usize - 1].load(Ordering::Relaxed),
                8
            );
            drop(few);
        });
    }

    async fn futures_take(slots: &Arc<ConnectionSlots>, n: usize) -> Vec<ConnectionSlot> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(slots.take(Wait::Handshake).await.unwrap());
        }
        out
    }

    #[test]
    fn dropping_a_slot_frees_it() {
        rt().block_on(async {
            let slots = ConnectionSlots::new(1, Duration::from_secs(5));
            let a = slots.take(Wait::Head).await.unwrap();
            assert!(a.busy());
            drop(a);
            assert_eq!(slots.in_use(), 0);
            assert!(lock(&slots.open).is_empty());
        });
    }

    #[test]
    fn per_ip_limit_counts_open_connections() {
        let p = PerIp::new(2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        let g1 = p.enter(a).unwrap();
        let g2 = p.enter(mapped).unwrap();
        assert!(
            p.enter(a).is_none(),
            "a third connection from the same address"
        );
        let _g3 = p.enter(b).unwrap();
        drop(g1);
        let _g4 = p.enter(a).unwrap();
        drop(g2);
        drop(_g4);
        assert_eq!(
            p.addresses(),
            1,
            "addresses without connections are forgotten"
        );

        let unlimited = PerIp::new(0);
        let guards: Vec<_> = (0..100).map(|_| unlimited.enter(a).unwrap()).collect();
        assert_eq!(guards.len(), 100);
    }
}

//! The stored form of a record: a convergent (join-semilattice) state, so that the
//! writes of many hosts merge into the same record whatever order they arrive in, and
//! merging the same change twice changes nothing.
//!
//! Every change carries a [`Stamp`] `(at, seq, host)`: `at` is a hybrid clock in Unix
//! seconds (the write's time, never below the newest stamp this host has seen),
//! `seq` a per-host sequence, and the host id breaks the remaining ties. Stamps order
//! the last-writer-wins registers below.
//!
//! Per variable ([`VarState`]):
//! - **counter parts**: each host's own running total of the increments it made, as
//!   `(sum, ops)`; a host only ever grows its own part, so parts merge by taking the
//!   one with more operations. Increments made on different hosts therefore add up.
//! - **base**: the last `Set`, `Delete` or type change, last-writer-wins by stamp,
//!   together with the counter parts its writer had seen (`offsets`). The value is
//!   `base + Σ (part − offset)` over hosts: a set absorbs the increments its writer
//!   saw and keeps every increment made concurrently elsewhere (no increment is lost
//!   to a set it did not see).
//! - **expiry** (`expirevar`): last-writer-wins by stamp.
//! - **members** of a multi-valued variable: each member is present or absent,
//!   last-writer-wins by stamp; a member only counts when its stamp is newer than the
//!   base (a set or delete of the variable clears the members before it).
//!
//! Per record ([`RecState`]): the creation (`create_time`, restarted when the record
//! expires) and `timeout` are last-writer-wins, `last_update_time` is a maximum, and
//! `update_counter` is a counter like the variables'. A record or variable that has
//! expired when a write touches it is restarted by that write, with a stamp, as the
//! single-host meaning ([`engine::collections::apply`]) wants.
//!
//! On one host, applying writes here and reading the result with
//! [`RecState::to_stored`] gives what `engine::collections::apply` gives (tested on
//! random write sequences). Known differences: sums are computed in 128 bits and
//! saturated once, so they differ from step-by-step saturation only past ±2^63;
//! `LAST_UPDATE_TIME` never moves backwards (an import cannot lower it); and a
//! variable's expiry is checked against the time of the write that touches it, so
//! when writes arrive out of time order (a write stamped a second earlier than the
//! one before it) a variable that `apply` dropped at the later-stamped write can
//! still be seen by the earlier-stamped one. Readers see the same either way
//! (`StoredRecord::live` at the current time).

use engine::collections::{
    NamedOp, RecordWrite, SET_MEMBER_LIMIT, StoredRecord, StoredVar, VarOp, VarValue, to_number,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Orders the changes of every host: `(at, seq, host)`, compared in that order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Stamp {
    /// Hybrid clock, Unix seconds.
    pub at: i64,
    /// Per-host sequence (for outside entries: derived from the stream entry id).
    pub seq: u64,
    /// The host that made the change.
    pub host: String,
}

impl Stamp {
    /// The stamp older than every real one (an empty register).
    pub fn zero() -> Self {
        Stamp {
            at: i64::MIN,
            seq: 0,
            host: String::new(),
        }
    }

    fn is_zero(&self) -> bool {
        self.at == i64::MIN && self.seq == 0 && self.host.is_empty()
    }
}

impl Default for Stamp {
    fn default() -> Self {
        Self::zero()
    }
}

/// One host's running total of the increments it made to a counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// Sum of the increments.
    pub sum: i64,
    /// How many increments (so a part with more operations is the newer one).
    pub ops: u64,
}

impl Part {
    fn newer(self, other: Part) -> Part {
        if (other.ops, other.sum) > (self.ops, self.sum) {
            other
        } else {
            self
        }
    }
}

/// Counter parts per writer, and (local only, never published) which part is this
/// host's and that part as last seen in the sync stream (what the other hosts know
/// of it).
///
/// A host's part is keyed `host@n`, `n` a sequence number drawn when the host first
/// counts on this variable: if the host later forgets the record (the sweeper
/// removed it) and counts again, it starts a new part instead of reusing a key whose
/// older, larger total other hosts still hold. An outside service's part is keyed by
/// its host id alone (every host computes it alike).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    /// Each writer's part.
    pub parts: BTreeMap<String, Part>,
    /// The key of this host's own part.
    #[serde(default)]
    pub mine: Option<String>,
    /// This host's part as last read back from the stream.
    #[serde(default)]
    pub echo: Option<Part>,
}

impl Counter {
    fn add(&mut self, key: String, d: i64) {
        let p = self.parts.entry(key).or_default();
        p.sum = p.sum.saturating_add(d);
        p.ops += 1;
    }

    /// Counts `d` for `origin`: into this host's own part for a local change, else
    /// into the outside writer's part.
    fn count(&mut self, origin: &mut Origin<'_>, now: i64, d: i64) {
        let key = if origin.echo_host.is_none() {
            match &self.mine {
                Some(k) => k.clone(),
                None => {
                    let k = format!("{}@{}", origin.host, (origin.stamps)(now).seq);
                    self.mine = Some(k.clone());
                    k
                }
            }
        } else {
            origin.host.to_string()
        };
        self.add(key, d);
    }

    fn merge_parts(&mut self, other: &BTreeMap<String, Part>) {
        for (h, p) in other {
            let slot = self.parts.entry(h.clone()).or_default();
            *slot = slot.newer(*p);
            if self.mine.as_ref() == Some(h) {
                self.echo = Some(self.echo.unwrap_or_default().newer(*p));
            }
        }
    }

    /// The parts a new base absorbs. With `echo`, for changes that every host must
    /// compute alike (outside entries), this host's part is taken as the stream
    /// knows it, not with its unpublished increments.
    fn seen(&self, echo: bool) -> BTreeMap<String, Part> {
        let mut seen = self.parts.clone();
        if echo && let Some(me) = &self.mine {
            match self.echo {
                Some(e) => {
                    seen.insert(me.clone(), e);
                }
                None => {
                    seen.remove(me);
                }
            }
        }
        seen
    }

    /// Only this host's own part (what it publishes).
    fn own(&self) -> Counter {
        Counter {
            parts: self
                .mine
                .as_ref()
                .and_then(|k| self.parts.get(k).map(|p| BTreeMap::from([(k.clone(), *p)])))
                .unwrap_or_default(),
            mine: None,
            echo: None,
        }
    }

    /// The parts as the stream knows them (this host's own as echoed).
    fn published(&self) -> Counter {
        Counter {
            parts: self.seen(true),
            mine: None,
            echo: None,
        }
    }

    /// `(Σ sum, Σ ops)` of the increments made after `offsets`.
    fn since(&self, offsets: &BTreeMap<String, Part>) -> (i128, u64) {
        let mut sum = 0i128;
        let mut ops = 0u64;
        for (h, p) in &self.parts {
            let o = offsets.get(h).copied().unwrap_or_default();
            if p.ops > o.ops {
                sum += i128::from(p.sum) - i128::from(o.sum);
                ops += p.ops - o.ops;
            }
        }
        (sum, ops)
    }
}

/// What the last set, delete or type change left.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum BaseValue {
    /// Deleted, or never set.
    #[default]
    Absent,
    /// A plain value.
    Scalar(Vec<u8>),
    /// A multi-valued variable (its members are kept beside).
    Set,
}

/// A last-writer-wins base with the counter parts its writer had seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Base {
    /// When it was written.
    pub stamp: Stamp,
    /// The value.
    pub value: BaseValue,
    /// Counter parts absorbed by this base.
    pub offsets: BTreeMap<String, Part>,
}

/// A last-writer-wins register.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lww<T> {
    /// When it was written.
    pub stamp: Stamp,
    /// The value.
    pub value: T,
}

impl<T: Clone> Lww<T> {
    fn merge(&mut self, other: &Lww<T>) -> bool {
        if other.stamp > self.stamp {
            *self = other.clone();
            true
        } else {
            false
        }
    }
}

/// One member of a multi-valued variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// When it was last added or removed.
    pub stamp: Stamp,
    /// Unix time it was last added (the eviction order).
    pub added_at: i64,
    /// Added (true) or removed.
    pub present: bool,
}

/// One variable, convergent (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VarState {
    /// Last set, delete or type change.
    pub base: Base,
    /// Increments per host.
    pub counter: Counter,
    /// `expirevar`.
    pub expires: Lww<Option<i64>>,
    /// Members, when the variable is multi-valued.
    pub members: BTreeMap<Vec<u8>, Member>,
}

/// What a variable holds now.
enum Current<'a> {
    Absent,
    Scalar(std::borrow::Cow<'a, [u8]>),
    Set,
}

impl VarState {
    fn current(&self) -> Current<'_> {
        let (sum, ops) = self.counter.since(&self.base.offsets);
        if ops > 0 {
            let start = match &self.base.value {
                BaseValue::Scalar(v) => i128::from(to_number(v)),
                _ => 0,
            };
            let n = (start + sum).clamp(i128::from(i64::MIN), i128::from(i64::MAX));
            return Current::Scalar(std::borrow::Cow::Owned(n.to_string().into_bytes()));
        }
        match &self.base.value {
            BaseValue::Absent => Current::Absent,
            BaseValue::Scalar(v) => Current::Scalar(std::borrow::Cow::Borrowed(v)),
            BaseValue::Set => Current::Set,
        }
    }

    fn exists(&self) -> bool {
        !matches!(self.current(), Current::Absent)
    }

    fn live_members(&self) -> impl Iterator<Item = (&Vec<u8>, &Member)> {
        self.members
            .iter()
            .filter(|(_, m)| m.present && m.stamp > self.base.stamp)
    }

    fn set_base(&mut self, stamp: Stamp, value: BaseValue, echo_host: Option<&str>) {
        self.base = Base {
            stamp,
            value,
            offsets: self.counter.seen(echo_host.is_some()),
        };
        // Members older than the base are dead for good.
        let base = &self.base.stamp;
        self.members.retain(|_, m| m.stamp > *base);
    }

    fn to_stored(&self) -> Option<StoredVar> {
        let value = match self.current() {
            Current::Absent => return None,
            Current::Scalar(v) => VarValue::Scalar(v.into_owned()),
            Current::Set => VarValue::Set(
                self.live_members()
                    .map(|(k, m)| (k.clone(), m.added_at))
                    .collect::<HashMap<_, _>>(),
            ),
        };
        Some(StoredVar {
            value,
            expires_at: self.expires.value,
        })
    }

    fn merge(&mut self, other: &VarState) {
        if other.base.stamp > self.base.stamp {
            self.base = other.base.clone();
            let base = &self.base.stamp;
            self.members.retain(|_, m| m.stamp > *base);
        }
        self.counter.merge_parts(&other.counter.parts);
        self.expires.merge(&other.expires);
        for (k, m) in &other.members {
            if m.stamp <= self.base.stamp {
                continue;
            }
            match self.members.get_mut(k) {
                Some(cur) if cur.stamp >= m.stamp => {}
                Some(cur) => *cur = m.clone(),
                None => {
                    self.members.insert(k.clone(), m.clone());
                }
            }
        }
        self.prune_tombstones();
    }

    /// Keeps at most [`SET_MEMBER_LIMIT`] removed members (the newest), so a set
    /// with churn stays bounded.
    fn prune_tombstones(&mut self) {
        let dead = self.members.values().filter(|m| !m.present).count();
        if dead > SET_MEMBER_LIMIT {
            let mut stamps: Vec<Stamp> = self
                .members
                .values()
                .filter(|m| !m.present)
                .map(|m| m.stamp.clone())
                .collect();
            stamps.sort();
            let cut = stamps[dead - SET_MEMBER_LIMIT].clone();
            self.members.retain(|_, m| m.present || m.stamp >= cut);
        }
    }
}

/// Record-level fields: creation (restarted when the record expires) with the update
/// counter's base.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Born {
    /// CREATE_TIME.
    pub create_time: i64,
    /// UPDATE_COUNTER at creation (an import can start above 0).
    pub update_base: u64,
    /// Update-counter parts absorbed at creation.
    pub offsets: BTreeMap<String, Part>,
}

/// A whole record, convergent (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecState {
    /// Creation, last-writer-wins; a zero stamp means no record.
    pub born: Lww<Born>,
    /// LAST_UPDATE_TIME (maximum).
    pub last_update: i64,
    /// TIMEOUT, last-writer-wins.
    pub timeout: Lww<i64>,
    /// UPDATE_COUNTER parts.
    pub updates: Counter,
    /// Variables by lower-case name.
    pub vars: BTreeMap<Vec<u8>, VarState>,
}

/// Who makes a change and how its stamps are drawn.
pub struct Origin<'a> {
    /// The host the change is counted for (counter parts, stamps).
    pub host: &'a str,
    /// This store's own host id when the change must come out alike on every host
    /// (an outside entry applied from the stream): new bases then absorb this host's
    /// part as the stream knows it. `None` for a local write.
    pub echo_host: Option<&'a str>,
    /// Draws the next stamp for a change at `at`.
    pub stamps: &'a mut dyn FnMut(i64) -> Stamp,
}

/// What one change touched, to publish only that.
#[derive(Debug, Default)]
pub struct Touched {
    /// Record-level fields changed.
    pub record: bool,
    /// Variables changed, with the members changed in each.
    pub vars: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
}

impl RecState {
    /// True when a record exists (it may have expired).
    pub fn exists(&self) -> bool {
        !self.born.stamp.is_zero()
    }

    /// Unix time from which the whole record is gone.
    pub fn expires_at(&self) -> i64 {
        self.last_update.saturating_add(self.timeout.value)
    }

    /// The record as the engine sees it (expiry not applied); `None` when none.
    pub fn to_stored(&self) -> Option<StoredRecord> {
        if !self.exists() {
            return None;
        }
        let (sum, _) = self.updates.since(&self.born.value.offsets);
        let updates =
            (i128::from(self.born.value.update_base) + sum).clamp(0, i128::from(u64::MAX));
        Some(StoredRecord {
            vars: self
                .vars
                .iter()
                .filter_map(|(k, v)| v.to_stored().map(|s| (k.clone(), s)))
                .collect(),
            create_time: self.born.value.create_time,
            last_update_time: self.last_update,
            update_counter: updates as u64,
            timeout: self.timeout.value,
        })
    }

    /// Restarts the record at `now` (it was absent or expired).
    fn restart(&mut self, now: i64, origin: &mut Origin<'_>, touched: &mut Touched) {
        let stamp = (origin.stamps)(now);
        for (name, var) in self.vars.iter_mut() {
            if var.exists() || var.expires.value.is_some() {
                var.set_base(stamp.clone(), BaseValue::Absent, origin.echo_host);
                var.expires = Lww {
                    stamp: stamp.clone(),
                    value: None,
                };
                touched.vars.entry(name.clone()).or_default();
            }
        }
        self.born = Lww {
            stamp,
            value: Born {
                create_time: now,
                update_base: 0,
                offsets: self.updates.seen(origin.echo_host.is_some()),
            },
        };
        touched.record = true;
    }

    /// Applies one write as `engine::collections::apply` means it, recording what
    /// changed in `touched`.
    pub fn apply_write(&mut self, w: &RecordWrite, origin: &mut Origin<'_>, touched: &mut Touched) {
        let now = w.at;
        if !self.exists() || self.expires_at() <= now {
            self.restart(now, origin, touched);
        }
        // Variables that expired before this write start again (once, before any op,
        // as `StoredRecord::live` does in `apply`).
        let names: BTreeSet<&Vec<u8>> = w.ops.iter().map(|o| &o.name).collect();
        for name in names {
            if let Some(var) = self.vars.get_mut(name)
                && var.exists()
                && var.expires.value.is_some_and(|t| t <= now)
            {
                let stamp = (origin.stamps)(now);
                var.set_base(stamp.clone(), BaseValue::Absent, origin.echo_host);
                var.expires = Lww { stamp, value: None };
                touched.vars.entry(name.clone()).or_default();
            }
        }
        for NamedOp { name, op } in &w.ops {
            self.apply_op(name, op, now, origin, touched);
        }
        self.last_update = self.last_update.max(now);
        self.updates.count(origin, now, 1);
        self.timeout = Lww {
            stamp: (origin.stamps)(now),
            value: w.timeout,
        };
        touched.record = true;
    }

    fn apply_op(
        &mut self,
        name: &[u8],
        op: &VarOp,
        now: i64,
        origin: &mut Origin<'_>,
        touched: &mut Touched,
    ) {
        let var = self.vars.entry(name.to_vec()).or_default();
        let changed = touched.vars.entry(name.to_vec()).or_default();
        match op {
            VarOp::Set(v) => {
                let stamp = (origin.stamps)(now);
                var.set_base(stamp, BaseValue::Scalar(v.clone()), origin.echo_host);
            }
            VarOp::Add(d) => var.counter.count(origin, now, *d),
            VarOp::Delete => {
                let stamp = (origin.stamps)(now);
                var.set_base(stamp.clone(), BaseValue::Absent, origin.echo_host);
                var.expires = Lww { stamp, value: None };
            }
            VarOp::ExpireAt(t) => {
                if var.exists() {
                    var.expires = Lww {
                        stamp: (origin.stamps)(now),
                        value: Some(*t),
                    };
                }
            }
            VarOp::AddMember(m) => {
                if !matches!(var.current(), Current::Set) {
                    let stamp = (origin.stamps)(now);
                    var.set_base(stamp, BaseValue::Set, origin.echo_host);
                }
                var.members.insert(
                    m.clone(),
                    Member {
                        stamp: (origin.stamps)(now),
                        added_at: now,
                        present: true,
                    },
                );
                changed.insert(m.clone());
                let live: Vec<(&Vec<u8>, &Member)> = var.live_members().collect();
                if live.len() > SET_MEMBER_LIMIT
                    && let Some(oldest) = live
                        .iter()
                        .min_by(|a, b| a.1.added_at.cmp(&b.1.added_at).then_with(|| a.0.cmp(b.0)))
                        .map(|(k, _)| (*k).clone())
                {
                    let stamp = (origin.stamps)(now);
                    if let Some(e) = var.members.get_mut(&oldest) {
                        e.stamp = stamp;
                        e.present = false;
                    }
                    changed.insert(oldest);
                }
                var.prune_tombstones();
            }
            VarOp::RemoveMember(m) => {
                if matches!(var.current(), Current::Set) {
                    let stamp = (origin.stamps)(now);
                    let added_at = var.members.get(m).map_or(now, |e| e.added_at);
                    var.members.insert(
                        m.clone(),
                        Member {
                            stamp,
                            added_at,
                            present: false,
                        },
                    );
                    changed.insert(m.clone());
                    var.prune_tombstones();
                }
            }
        }
    }

    /// Replaces the record by `rec` (an import or a `ctx` edit), as a change stamped
    /// now: variables not in `rec` are deleted, counters restart from `rec`'s values.
    pub fn replace(&mut self, rec: &StoredRecord, origin: &mut Origin<'_>, touched: &mut Touched) {
        let stamp = (origin.stamps)(rec.last_update_time);
        self.born = Lww {
            stamp: stamp.clone(),
            value: Born {
                create_time: rec.create_time,
                update_base: rec.update_counter,
                offsets: self.updates.seen(origin.echo_host.is_some()),
            },
        };
        self.last_update = self.last_update.max(rec.last_update_time);
        self.timeout = Lww {
            stamp: stamp.clone(),
            value: rec.timeout,
        };
        touched.record = true;
        let names: BTreeSet<Vec<u8>> = self.vars.keys().chain(rec.vars.keys()).cloned().collect();
        for name in names {
            let var = self.vars.entry(name.clone()).or_default();
            let changed = touched.vars.entry(name.clone()).or_default();
            let stamp = (origin.stamps)(rec.last_update_time);
            match rec.vars.get(&name) {
                None => {
                    var.set_base(stamp.clone(), BaseValue::Absent, origin.echo_host);
                    var.expires = Lww { stamp, value: None };
                }
                Some(sv) => {
                    match &sv.value {
                        VarValue::Scalar(v) => var.set_base(
                            stamp.clone(),
                            BaseValue::Scalar(v.clone()),
                            origin.echo_host,
                        ),
                        VarValue::Set(members) => {
                            var.set_base(stamp.clone(), BaseValue::Set, origin.echo_host);
                            for (m, t) in members {
                                var.members.insert(
                                    m.clone(),
                                    Member {
                                        stamp: (origin.stamps)(rec.last_update_time),
                                        added_at: *t,
                                        present: true,
                                    },
                                );
                                changed.insert(m.clone());
                            }
                        }
                    }
                    var.expires = Lww {
                        stamp,
                        value: sv.expires_at,
                    };
                }
            }
        }
    }

    /// Merges another host's state (or a part of it) into this one. Idempotent,
    /// commutative and associative (on everything but the local-only fields: which
    /// part is this host's, and its echo).
    pub fn merge(&mut self, other: &RecState) {
        self.born.merge(&other.born);
        self.last_update = self.last_update.max(other.last_update);
        self.timeout.merge(&other.timeout);
        self.updates.merge_parts(&other.updates.parts);
        for (name, v) in &other.vars {
            self.vars.entry(name.clone()).or_default().merge(v);
        }
    }

    /// The part of this state a change touched, to publish: record-level registers,
    /// the touched variables (their base, expiry and this host's counter part) and
    /// the touched members. Other hosts' parts are left out (each host publishes its
    /// own) and so are the local-only fields.
    pub fn delta(&self, touched: &Touched) -> RecState {
        let mut out = RecState {
            born: self.born.clone(),
            last_update: self.last_update,
            timeout: self.timeout.clone(),
            updates: self.updates.own(),
            vars: BTreeMap::new(),
        };
        for (name, members) in &touched.vars {
            let Some(v) = self.vars.get(name) else {
                continue;
            };
            out.vars.insert(
                name.clone(),
                VarState {
                    base: v.base.clone(),
                    counter: v.counter.own(),
                    expires: v.expires.clone(),
                    members: members
                        .iter()
                        .filter_map(|m| v.members.get(m).map(|e| (m.clone(), e.clone())))
                        .collect(),
                },
            );
        }
        out
    }

    /// This state as the sync stream knows it, for a snapshot other hosts start
    /// from: this host's own parts as last read back from the stream (its
    /// unpublished increments reach the others through the stream, not twice).
    pub fn published_view(&self) -> RecState {
        let mut out = self.clone();
        out.updates = self.updates.published();
        for v in out.vars.values_mut() {
            v.counter = v.counter.published();
        }
        out
    }

    /// The newest stamp time in this state (to keep the local clock ahead of it).
    pub fn max_at(&self) -> i64 {
        let mut at = self.born.stamp.at.max(self.timeout.stamp.at);
        for v in self.vars.values() {
            at = at.max(v.base.stamp.at).max(v.expires.stamp.at);
            for m in v.members.values() {
                at = at.max(m.stamp.at);
            }
        }
        at
    }
}

/// Bytes that serialise as one byte string (postcard: a length and the bytes)
/// rather than as a sequence of numbers, so decoding is a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ByteBuf(Vec<u8>);

impl Serialize for ByteBuf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ByteBuf;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

/// The record as readers see it, stored beside the state so the request path
/// decodes only this (a few allocations) and never the convergent state.
#[derive(Serialize, Deserialize)]
struct ReadForm {
    create_time: i64,
    last_update_time: i64,
    update_counter: u64,
    timeout: i64,
    vars: Vec<(ByteBuf, ReadVar)>,
}

#[derive(Serialize, Deserialize)]
struct ReadVar {
    value: ReadValue,
    expires_at: Option<i64>,
}

#[derive(Serialize, Deserialize)]
enum ReadValue {
    Scalar(ByteBuf),
    Set(Vec<(ByteBuf, i64)>),
}

/// Encodes a state for LMDB: a format byte, the length of the read form (4 bytes,
/// little-endian), the read form, then the state (both postcard).
pub fn encode(state: &RecState) -> Vec<u8> {
    let read = state.to_stored().map(|r| ReadForm {
        create_time: r.create_time,
        last_update_time: r.last_update_time,
        update_counter: r.update_counter,
        timeout: r.timeout,
        vars: r
            .vars
            .into_iter()
            .map(|(k, v)| {
                let value = match v.value {
                    VarValue::Scalar(b) => ReadValue::Scalar(ByteBuf(b)),
                    VarValue::Set(m) => {
                        ReadValue::Set(m.into_iter().map(|(k, t)| (ByteBuf(k), t)).collect())
                    }
                };
                (
                    ByteBuf(k),
                    ReadVar {
                        value,
                        expires_at: v.expires_at,
                    },
                )
            })
            .collect(),
    });
    // Serialising plain structs, maps and options to a Vec cannot fail.
    let read = postcard::to_stdvec(&read).unwrap_or_default();
    let mut out = Vec::with_capacity(5 + read.len() + 64);
    out.push(FORMAT);
    out.extend((read.len() as u32).to_le_bytes());
    out.extend(read);
    out.extend(postcard::to_stdvec(state).unwrap_or_default());
    out
}

fn split(bytes: &[u8]) -> Result<(&[u8], &[u8]), String> {
    match bytes.split_first() {
        Some((&FORMAT, rest)) if rest.len() >= 4 => {
            let (len, rest) = rest.split_at(4);
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            if rest.len() < len {
                return Err("truncated record".into());
            }
            Ok(rest.split_at(len))
        }
        Some((&FORMAT, _)) => Err("truncated record".into()),
        Some((v, _)) => Err(format!("unknown record format {v}")),
        None => Err("empty record".into()),
    }
}

/// Decodes the state of [`encode`]'s output.
pub fn decode(bytes: &[u8]) -> Result<RecState, String> {
    let (_, state) = split(bytes)?;
    postcard::from_bytes(state).map_err(|e| e.to_string())
}

/// Decodes only the record as readers see it (expiry not applied).
pub fn decode_read(bytes: &[u8]) -> Result<Option<StoredRecord>, String> {
    let (read, _) = split(bytes)?;
    let form: Option<ReadForm> = postcard::from_bytes(read).map_err(|e| e.to_string())?;
    Ok(form.map(|f| StoredRecord {
        vars: f
            .vars
            .into_iter()
            .map(|(k, v)| {
                let value = match v.value {
                    ReadValue::Scalar(b) => VarValue::Scalar(b.0),
                    ReadValue::Set(m) => {
                        VarValue::Set(m.into_iter().map(|(k, t)| (k.0, t)).collect())
                    }
                };
                (
                    k.0,
                    StoredVar {
                        value,
                        expires_at: v.expires_at,
                    },
                )
            })
            .collect(),
        create_time: f.create_time,
        last_update_time: f.last_update_time,
        update_counter: f.update_counter,
        timeout: f.timeout,
    }))
}

/// Encodes a list of record changes (an outbox entry, a stream entry's payload).
pub fn encode_changes(changes: &[(Vec<u8>, RecState)]) -> Vec<u8> {
    let mut out = vec![FORMAT];
    out.extend(postcard::to_stdvec(changes).unwrap_or_default());
    out
}

/// Decodes [`encode_changes`]'s output.
pub fn decode_changes(bytes: &[u8]) -> Result<Vec<(Vec<u8>, RecState)>, String> {
    match bytes.split_first() {
        Some((&FORMAT, rest)) => postcard::from_bytes(rest).map_err(|e| e.to_string()),
        Some((v, _)) => Err(format!("unknown change format {v}")),
        None => Err("empty change list".into()),
    }
}

/// Version byte in front of every stored state.
const FORMAT: u8 = 1;

#[cfg(test)]
mod tests {
    use super::*;
    use engine::collections::{WriteLog, apply};
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn local(host: &str) -> impl FnMut(i64) -> Stamp + '_ {
        let mut seq = 0;
        let mut last = i64::MIN;
        move |at| {
            seq += 1;
            last = last.max(at);
            Stamp {
                at: last,
                seq,
                host: host.to_string(),
            }
        }
    }

    fn random_write(rng: &mut StdRng, at: i64) -> RecordWrite {
        let mut log = WriteLog::default();
        for _ in 0..rng.random_range(1..5) {
            let name = [b"a".as_slice(), b"b", b"s"][rng.random_range(0..3)];
            let op = match rng.random_range(0..9) {
                0 => VarOp::Set(rng.random_range(-5..50).to_string().into_bytes()),
                1 => VarOp::Set(b"text".to_vec()),
                2 | 3 => VarOp::Add(rng.random_range(-3..6)),
                4 => VarOp::Delete,
                5 => VarOp::ExpireAt(at + rng.random_range(-1..4)),
                6 | 7 => VarOp::AddMember(vec![b'm', rng.random_range(b'0'..b'4')]),
                _ => VarOp::RemoveMember(vec![b'm', rng.random_range(b'0'..b'4')]),
            };
            log.push(name, op);
        }
        if rng.random_range(0..10) == 0 {
            log.set_timeout(rng.random_range(1..6));
        }
        log.finish(at, 8)
    }

    #[test]
    fn single_host_matches_engine_apply() {
        for seed in 0..300 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut expected: Option<StoredRecord> = None;
            let mut state = RecState::default();
            let mut stamps = local("h");
            let mut at = 1000;
            for step in 0..40 {
                at += rng.random_range(0..4);
                let w = random_write(&mut rng, at);
                expected = Some(apply(expected, &w));
                let mut origin = Origin {
                    host: "h",
                    echo_host: None,
                    stamps: &mut stamps,
                };
                state.apply_write(&w, &mut origin, &mut Touched::default());
                // Round trip through the stored encoding on the way; the read form
                // says the same as the state.
                let bytes = encode(&state);
                state = decode(&bytes).unwrap();
                assert_eq!(decode_read(&bytes).unwrap(), state.to_stored());
                let got = state.to_stored().and_then(|r| r.live(at));
                let want = expected.clone().and_then(|r| r.live(at));
                assert_eq!(got, want, "seed {seed} step {step} write {w:?}");
            }
        }
    }

    /// Applies writes on two hosts, exchanges the deltas in shuffled order (some
    /// twice), and checks both states end equal, with every increment counted.
    #[test]
    fn two_hosts_converge_and_increments_add_up() {
        for seed in 0..200 {
            let mut rng = StdRng::seed_from_u64(seed);
            let hosts = ["a", "b"];
            let mut states = [RecState::default(), RecState::default()];
            let mut stamps_a = local("a");
            let mut stamps_b = local("b");
            let mut deltas: [Vec<RecState>; 2] = [vec![], vec![]];
            let mut increments = 0i64;
            for _ in 0..30 {
                let i = rng.random_range(0..2);
                let w = if rng.random_range(0..3) == 0 {
                    random_write(&mut rng, 1000)
                } else {
                    increments += 1;
                    let mut log = WriteLog::default();
                    log.push(b"hits", VarOp::Add(1));
                    log.push(b"hits", VarOp::ExpireAt(5000));
                    log.finish(1000, 1 << 20)
                };
                let stamps: &mut dyn FnMut(i64) -> Stamp =
                    if i == 0 { &mut stamps_a } else { &mut stamps_b };
                let mut origin = Origin {
                    host: hosts[i],
                    echo_host: None,
                    stamps,
                };
                let mut t = Touched::default();
                states[i].apply_write(&w, &mut origin, &mut t);
                deltas[i].push(states[i].delta(&t));
                // Sometimes deliver some of the other host's deltas early.
                if rng.random_range(0..4) == 0 {
                    let j = 1 - i;
                    for d in deltas[j].iter().take(rng.random_range(0..3)) {
                        states[i].merge(d);
                    }
                }
            }
            for (i, st) in states.iter_mut().enumerate() {
                let mut ds = deltas[1 - i].clone();
                ds.reverse();
                ds.extend(deltas[1 - i].iter().cloned());
                for d in &ds {
                    st.merge(d);
                }
            }
            let a = states[0].to_stored();
            let b = states[1].to_stored();
            assert_eq!(a, b, "seed {seed}");
            let hits = a
                .unwrap()
                .vars
                .get(b"hits".as_slice())
                .map(|v| v.value.as_read().into_owned());
            let want = (increments > 0).then(|| increments.to_string().into_bytes());
            assert_eq!(hits, want, "seed {seed}");
        }
    }

    #[test]
    fn concurrent_increments_on_two_hosts_sum() {
        let mut a = RecState::default();
        let mut b = RecState::default();
        let mut sa = local("a");
        let mut sb = local("b");
        let mut log = WriteLog::default();
        log.push(b"hits", VarOp::Add(1));
        log.push(b"hits", VarOp::ExpireAt(2000));
        let w = log.finish(1000, 3600);
        let mut da = vec![];
        let mut db = vec![];
        for _ in 0..7 {
            let mut t = Touched::default();
            a.apply_write(
                &w,
                &mut Origin {
                    host: "a",
                    echo_host: None,
                    stamps: &mut sa,
                },
                &mut t,
            );
            da.push(a.delta(&t));
        }
        for _ in 0..5 {
            let mut t = Touched::default();
            b.apply_write(
                &w,
                &mut Origin {
                    host: "b",
                    echo_host: None,
                    stamps: &mut sb,
                },
                &mut t,
            );
            db.push(b.delta(&t));
        }
        for d in &db {
            a.merge(d);
            a.merge(d);
        }
        for d in &da {
            b.merge(d);
        }
        let ra = a.to_stored().unwrap();
        assert_eq!(ra, b.to_stored().unwrap());
        assert_eq!(
            ra.vars[b"hits".as_slice()].value,
            VarValue::Scalar(b"12".to_vec())
        );
        assert_eq!(ra.update_counter, 12);
        // A set on a after seeing 7+5 keeps b's later increments.
        let mut log = WriteLog::default();
        log.push(b"hits", VarOp::Set(b"100".to_vec()));
        let mut t = Touched::default();
        a.apply_write(
            &log.finish(1001, 3600),
            &mut Origin {
                host: "a",
                echo_host: None,
                stamps: &mut sa,
            },
            &mut t,
        );
        let set = a.delta(&t);
        let mut t = Touched::default();
        b.apply_write(
            &w,
            &mut Origin {
                host: "b",
                echo_host: None,
                stamps: &mut sb,
            },
            &mut t,
        );
        a.merge(&b.delta(&t));
        b.merge(&set);
        let ra = a.to_stored().unwrap();
        assert_eq!(ra, b.to_stored().unwrap());
        assert_eq!(
            ra.vars[b"hits".as_slice()].value,
            VarValue::Scalar(b"101".to_vec())
        );
    }
}

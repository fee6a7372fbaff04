//! Writes to persistent records, as data: what a transaction changed, kept as
//! operations (an increment stays an increment) so that a store can merge the writes
//! of many transactions, and of many hosts, without losing counts.

use super::record::{SET_MEMBER_LIMIT, StoredRecord, StoredVar, VarValue};
use super::to_number;
use serde::{Deserialize, Serialize};

/// One change to one variable of a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VarOp {
    /// `setvar:coll.name=value` (or `setvar:coll.name`, value 1).
    Set(#[serde(with = "text")] Vec<u8>),
    /// `setvar:coll.name=+n` / `=-n`, and `deprecatevar`: added to the stored value.
    Add(i64),
    /// `setvar:!coll.name`.
    Delete,
    /// `expirevar`: the variable is gone from this Unix time on.
    ExpireAt(i64),
    /// `addmember`: adds a member to the multi-valued variable.
    AddMember(#[serde(with = "text")] Vec<u8>),
    /// `delmember`: removes a member.
    RemoveMember(#[serde(with = "text")] Vec<u8>),
}

/// The changes one transaction (or one outside writer) made to one record (the
/// record's [`RecordKey`] travels beside it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordWrite {
    /// Unix time of the write.
    pub at: i64,
    /// The record's TIMEOUT after this write, in seconds.
    pub timeout: i64,
    /// Operations in order.
    pub ops: Vec<NamedOp>,
}

/// One operation on the variable it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedOp {
    /// The variable's lower-case name.
    #[serde(with = "text")]
    pub name: Vec<u8>,
    /// What is done to it.
    pub op: VarOp,
}

mod text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::super::record::bytes_to_text(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        super::super::record::bytes_from_text(&s).map_err(serde::de::Error::custom)
    }
}

/// The operations a transaction has made on one record so far, coalesced per
/// variable as they come: a set followed by increments is one set, increments add
/// up, a delete drops what came before it, and an expiry never changes the kind of
/// the operation it follows (so `setvar:ip.hits=+1,expirevar:ip.hits=60` stays an
/// increment).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteLog {
    ops: Vec<NamedOp>,
    timeout: Option<i64>,
}

impl WriteLog {
    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.timeout.is_none()
    }

    /// Sets the record's TIMEOUT (`setvar:ip.timeout=N`).
    pub fn set_timeout(&mut self, seconds: i64) {
        self.timeout = Some(seconds);
    }

    /// Records one operation on `name`.
    pub fn push(&mut self, name: &[u8], op: VarOp) {
        let value_op = |o: &VarOp| matches!(o, VarOp::Set(_) | VarOp::Add(_) | VarOp::Delete);
        match op {
            VarOp::Set(_) => self
                .ops
                .retain(|NamedOp { name: n, op: o }| n != name || !value_op(o) && !is_member(o)),
            VarOp::Delete => self.ops.retain(|NamedOp { name: n, .. }| n != name),
            VarOp::Add(d) => {
                if let Some(NamedOp { op: last, .. }) = self
                    .ops
                    .iter_mut()
                    .rev()
                    .find(|NamedOp { name: n, op: o }| n == name && (value_op(o) || is_member(o)))
                {
                    match last {
                        VarOp::Set(v) => {
                            *v = (to_number(v).saturating_add(d)).to_string().into_bytes();
                            return;
                        }
                        VarOp::Add(sum) => {
                            *sum = sum.saturating_add(d);
                            return;
                        }
                        VarOp::Delete => {
                            // Counting from nothing again: an absolute value.
                            self.ops.push(NamedOp {
                                name: name.to_vec(),
                                op: VarOp::Set(d.to_string().into_bytes()),
                            });
                            return;
                        }
                        _ => {}
                    }
                }
            }
            VarOp::ExpireAt(_) => self
                .ops
                .retain(|NamedOp { name: n, op: o }| n != name || !matches!(o, VarOp::ExpireAt(_))),
            VarOp::AddMember(ref m) | VarOp::RemoveMember(ref m) => {
                self.ops.retain(|NamedOp { name: n, op: o }| {
                    n != name
                        || !matches!(o, VarOp::AddMember(x) | VarOp::RemoveMember(x) if x == m)
                })
            }
        }
        self.ops.push(NamedOp {
            name: name.to_vec(),
            op,
        });
    }

    /// The write to hand to a store, stamped with the time and the record TIMEOUT
    /// (`default_timeout` unless the rules set one).
    pub fn finish(self, at: i64, default_timeout: i64) -> RecordWrite {
        RecordWrite {
            at,
            timeout: self.timeout.unwrap_or(default_timeout),
            ops: self.ops,
        }
    }
}

fn is_member(o: &VarOp) -> bool {
    matches!(o, VarOp::AddMember(_) | VarOp::RemoveMember(_))
}

/// Applies one write to a record as the store holds it (`None`: no record). A record
/// that expired before the write starts afresh. This is the reference meaning of a
/// write on one host: [`super::MemoryStore`] applies writes through it, and the
/// `store` crate's convergent form is tested against it.
pub fn apply(record: Option<StoredRecord>, write: &RecordWrite) -> StoredRecord {
    let now = write.at;
    let mut rec = match record.and_then(|r| r.live(now)) {
        Some(r) => r,
        None => StoredRecord {
            create_time: now,
            ..Default::default()
        },
    };
    for NamedOp { name, op } in &write.ops {
        apply_op(&mut rec, name, op, now);
    }
    rec.last_update_time = rec.last_update_time.max(now);
    rec.update_counter = rec.update_counter.saturating_add(1);
    rec.timeout = write.timeout;
    rec
}

/// Applies one operation to one variable of a record.
pub fn apply_op(rec: &mut StoredRecord, name: &[u8], op: &VarOp, now: i64) {
    match op {
        VarOp::Set(v) => {
            let expires_at = rec.vars.get(name).and_then(|old| old.expires_at);
            rec.vars.insert(
                name.to_vec(),
                StoredVar {
                    value: VarValue::Scalar(v.clone()),
                    expires_at,
                },
            );
        }
        VarOp::Add(d) => {
            let slot = rec
                .vars
                .entry(name.to_vec())
                .or_insert_with(|| StoredVar::scalar("0"));
            let cur = match &slot.value {
                VarValue::Scalar(v) => to_number(v),
                VarValue::Set(_) => 0,
            };
            slot.value = VarValue::Scalar(cur.saturating_add(*d).to_string().into_bytes());
        }
        VarOp::Delete => {
            rec.vars.remove(name);
        }
        VarOp::ExpireAt(at) => {
            if let Some(v) = rec.vars.get_mut(name) {
                v.expires_at = Some(*at);
            }
        }
        VarOp::AddMember(m) => {
            let slot = rec.vars.entry(name.to_vec()).or_insert_with(|| StoredVar {
                value: VarValue::Set(Default::default()),
                expires_at: None,
            });
            if !matches!(slot.value, VarValue::Set(_)) {
                slot.value = VarValue::Set(Default::default());
            }
            if let VarValue::Set(members) = &mut slot.value {
                members.insert(m.clone(), now);
                if members.len() > SET_MEMBER_LIMIT
                    && let Some(oldest) = members
                        .iter()
                        .min_by(|a, b| a.1.cmp(b.1).then_with(|| a.0.cmp(b.0)))
                        .map(|(k, _)| k.clone())
                {
                    members.remove(&oldest);
                }
            }
        }
        VarOp::RemoveMember(m) => {
            if let Some(StoredVar {
                value: VarValue::Set(members),
                ..
            }) = rec.vars.get_mut(name)
            {
                members.remove(m);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, op: VarOp) -> NamedOp {
        NamedOp {
            name: name.as_bytes().to_vec(),
            op,
        }
    }

    fn value(r: &StoredRecord, n: &str) -> Option<Vec<u8>> {
        r.vars
            .get(n.as_bytes())
            .map(|v| v.value.as_read().into_owned())
    }

    #[test]
    fn expiry_keeps_an_increment_an_increment() {
        let mut log = WriteLog::default();
        log.push(b"hits", VarOp::Add(1));
        log.push(b"hits", VarOp::ExpireAt(160));
        let w = log.finish(100, 3600);
        assert_eq!(
            w.ops,
            vec![op("hits", VarOp::Add(1)), op("hits", VarOp::ExpireAt(160))]
        );
        // Two transactions that each read 0 still count 2.
        let r = apply(None, &w);
        let r = apply(Some(r), &w);
        assert_eq!(value(&r, "hits").unwrap(), b"2");
        assert_eq!(r.vars[b"hits".as_slice()].expires_at, Some(160));
        assert_eq!(r.update_counter, 2);
    }

    #[test]
    fn coalescing() {
        let mut log = WriteLog::default();
        log.push(b"a", VarOp::Add(2));
        log.push(b"a", VarOp::Add(3));
        log.push(b"b", VarOp::Set(b"10".to_vec()));
        log.push(b"b", VarOp::Add(-4));
        log.push(b"c", VarOp::Add(1));
        log.push(b"c", VarOp::Delete);
        log.push(b"c", VarOp::Add(7));
        let w = log.finish(5, 60);
        assert_eq!(
            w.ops,
            vec![
                op("a", VarOp::Add(5)),
                op("b", VarOp::Set(b"6".to_vec())),
                op("c", VarOp::Delete),
                op("c", VarOp::Set(b"7".to_vec())),
            ]
        );
        let r = apply(None, &w);
        assert_eq!(value(&r, "a").unwrap(), b"5");
        assert_eq!(value(&r, "b").unwrap(), b"6");
        assert_eq!(value(&r, "c").unwrap(), b"7");
        assert_eq!((r.create_time, r.last_update_time, r.timeout), (5, 5, 60));
    }

    #[test]
    fn expired_records_start_again() {
        let mut log = WriteLog::default();
        log.push(b"n", VarOp::Add(1));
        let r = apply(None, &log.clone().finish(100, 60));
        let r = apply(Some(r), &log.clone().finish(150, 60));
        assert_eq!(value(&r, "n").unwrap(), b"2");
        // 60 s after the last write the record is gone.
        let r = apply(Some(r), &log.finish(210, 60));
        assert_eq!(value(&r, "n").unwrap(), b"1");
        assert_eq!(r.create_time, 210);
        assert_eq!(r.update_counter, 1);
    }

    #[test]
    fn members() {
        let mut log = WriteLog::default();
        log.push(b"tokens", VarOp::AddMember(b"t1".to_vec()));
        log.push(b"tokens", VarOp::AddMember(b"t2".to_vec()));
        log.push(b"tokens", VarOp::AddMember(b"t1".to_vec()));
        let r = apply(None, &log.finish(1, 60));
        assert_eq!(value(&r, "tokens").unwrap(), b"2");
        let mut log = WriteLog::default();
        log.push(b"tokens", VarOp::RemoveMember(b"t2".to_vec()));
        let r = apply(Some(r), &log.finish(2, 60));
        let VarValue::Set(m) = &r.vars[b"tokens".as_slice()].value else {
            panic!("not a set")
        };
        assert!(m.contains_key(b"t1".as_slice()) && !m.contains_key(b"t2".as_slice()));
    }

    #[test]
    fn sets_are_bounded_oldest_out() {
        let mut r = None;
        for i in 0..(SET_MEMBER_LIMIT as i64 + 5) {
            let mut log = WriteLog::default();
            log.push(b"s", VarOp::AddMember(i.to_string().into_bytes()));
            r = Some(apply(r, &log.finish(10 + i, 1 << 30)));
        }
        let r = r.unwrap();
        let VarValue::Set(m) = &r.vars[b"s".as_slice()].value else {
            panic!("not a set")
        };
        assert_eq!(m.len(), SET_MEMBER_LIMIT);
        assert!(!m.contains_key(b"4".as_slice()));
        assert!(m.contains_key(b"5".as_slice()));
    }

    #[test]
    fn writes_round_trip_through_json() {
        let mut log = WriteLog::default();
        log.push(b"a", VarOp::Add(2));
        log.push(b"b", VarOp::Set(vec![0xff]));
        log.push(b"s", VarOp::AddMember(b"m".to_vec()));
        let w = log.finish(5, 60);
        let j = serde_json::to_string(&w).unwrap();
        let back: RecordWrite = serde_json::from_str(&j).unwrap();
        assert_eq!(back, w);
    }
}

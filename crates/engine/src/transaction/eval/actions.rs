//! Actions: what a matching rule does (setvar, ctl, collections, the match
//! record), run in rule order.

use super::targets::*;
use crate::actions::{Action, CollectionKind, Ctl, SetOp};
use crate::collections::{RecordKey, StoredVar, VarOp, VarValue, to_number};
use crate::log::MatchRecord;
use crate::macros::MacroContext;
use crate::rule::Rule;
use crate::transaction::{Persistent, Transaction};
use std::borrow::Cow;

impl Transaction {
    pub(super) fn run_match_actions(&mut self, rule: &Rule) {
        for a in &rule.match_actions {
            self.run_action(rule, a);
        }
    }

    pub(super) fn run_full_match_actions(&mut self, rule: &Rule) {
        for a in &rule.full_match_actions {
            self.run_action(rule, a);
        }
    }

    pub(super) fn now_secs(&self) -> i64 {
        self.ctx().now_unix_micros / 1_000_000
    }

    pub(super) fn run_action(&mut self, rule: &Rule, action: &Action) {
        match action {
            Action::SetVar {
                collection,
                name,
                op,
            } if *collection == CollectionKind::Tx => self.set_tx_var(rule, name, op),
            Action::SetVar {
                collection,
                name,
                op,
            } => {
                let (key, value) = {
                    let view = self.view(Some(rule));
                    let key = name.expand(&view).to_ascii_lowercase();
                    let value = match op {
                        SetOp::Set(m) | SetOp::Add(m) | SetOp::Sub(m) => {
                            Some(m.expand(&view).into_owned())
                        }
                        SetOp::SetOne | SetOp::Delete => None,
                    };
                    (key, value)
                };
                self.set_var(*collection, key, op, value);
            }
            Action::SetEnv { name, value } => {
                let v = value.expand(&self.view(Some(rule))).into_owned();
                self.state.env.insert(name.as_bytes().to_vec(), v);
            }
            Action::ExpireVar {
                collection,
                name,
                seconds,
            } => {
                let (key, secs) = {
                    let view = self.view(Some(rule));
                    (
                        name.expand(&view).to_ascii_lowercase(),
                        to_number(&seconds.expand(&view)),
                    )
                };
                let at = self.now_secs().saturating_add(secs);
                if let Some(p) = self.state.persistent[collection.index()].as_mut()
                    && let Some(v) = p.values.get_mut(&key)
                {
                    v.expires_at = Some(at);
                    p.log.push(&key, VarOp::ExpireAt(at));
                }
            }
            Action::DeprecateVar {
                collection,
                name,
                spec,
            } => {
                let (key, spec) = {
                    let view = self.view(Some(rule));
                    (
                        name.expand(&view).to_ascii_lowercase(),
                        spec.expand_string(&view),
                    )
                };
                self.deprecate_var(*collection, &key, &spec);
            }
            Action::Member {
                collection,
                name,
                value,
                add,
            } => {
                let (key, member) = {
                    let view = self.view(Some(rule));
                    (
                        name.expand(&view).to_ascii_lowercase(),
                        value.expand(&view).into_owned(),
                    )
                };
                let op = if *add {
                    VarOp::AddMember(member)
                } else {
                    VarOp::RemoveMember(member)
                };
                self.write_persistent(*collection, key, op);
            }
            Action::InitCol { collection, key } => {
                let key = key.expand(&self.view(Some(rule))).into_owned();
                self.init_collection(*collection, key);
            }
            Action::SetUid(m) => {
                let key = m.expand(&self.view(Some(rule))).into_owned();
                self.init_collection(CollectionKind::User, key);
            }
            Action::SetSid(m) => {
                let key = m.expand(&self.view(Some(rule))).into_owned();
                self.init_collection(CollectionKind::Session, key);
            }
            Action::Ctl(ctl) => {
                if self.breaks_folds(rule) {
                    // A removal the folds did not account for: from here on every
                    // link is evaluated as written.
                    self.state.folds_valid = false;
                }
                self.run_ctl(ctl)
            }
        }
    }

    /// Opens a persistent collection for the rest of the transaction: reads its
    /// record once (a failed read leaves it empty and is reported through
    /// [`Event::CollectionReadFailed`](crate::events::Event)), and adds the built-in fields.
    pub(super) fn init_collection(&mut self, kind: CollectionKind, key: Vec<u8>) {
        if self.state.persistent[kind.index()].is_some() {
            return;
        }
        let now = self.now_secs();
        let config = self.ruleset.config();
        let app = config.web_app_id.as_str();
        let timeout = i64::try_from(config.collection_timeout).unwrap_or(i64::MAX);
        let record_key = match RecordKey::new(app, kind, key) {
            Ok(k) => k,
            Err(e) => {
                self.events
                    .push_back(crate::events::Event::CollectionReadFailed(e));
                return;
            }
        };
        let stored = match self.ctx().store.as_ref().map(|s| s.read(&record_key)) {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(r))) => r.live(now),
            Some(Err(e)) => {
                tracing::warn!("collection read failed: {e}");
                self.events
                    .push_back(crate::events::Event::CollectionReadFailed(e));
                None
            }
        };
        let is_new = stored.is_none();
        let record = stored.unwrap_or(crate::collections::StoredRecord {
            create_time: now,
            last_update_time: now,
            timeout,
            ..Default::default()
        });
        let update_rate = record.update_rate(now);
        let mut values = record.vars;
        let mut builtin = |name: &str, v: Vec<u8>| {
            values.insert(name.as_bytes().to_vec(), StoredVar::scalar(v));
        };
        builtin("key", record_key.key.clone());
        builtin("timeout", record.timeout.to_string().into_bytes());
        builtin("create_time", record.create_time.to_string().into_bytes());
        builtin(
            "last_update_time",
            record.last_update_time.to_string().into_bytes(),
        );
        builtin(
            "update_counter",
            record.update_counter.to_string().into_bytes(),
        );
        builtin("is_new", if is_new { b"1".to_vec() } else { b"0".to_vec() });
        if let Some(rate) = update_rate {
            builtin("update_rate", rate.to_string().into_bytes());
        }
        self.state.persistent[kind.index()] = Some(Persistent {
            key: record_key,
            values,
            log: Default::default(),
        });
    }

    /// `deprecatevar:coll.name=N/S`: lowers a counter by N for every S seconds since
    /// the record was last written (ModSecurity's definition), never below 0. It
    /// goes to the store as a decrement, so increments made meanwhile elsewhere stay.
    pub(super) fn deprecate_var(&mut self, collection: CollectionKind, key: &[u8], spec: &str) {
        let now = self.now_secs();
        let Some(p) = self.state.persistent[collection.index()].as_mut() else {
            return;
        };
        let (amount, period) = match spec.split_once('/') {
            Some((a, s)) => (to_number(a.as_bytes()), to_number(s.as_bytes())),
            None => (to_number(spec.as_bytes()), 0),
        };
        let last = p
            .values
            .get(b"last_update_time".as_slice())
            .map(|v| to_number(&v.value.as_read()))
            .unwrap_or(now);
        let steps = if period > 0 { (now - last) / period } else { 1 };
        let Some(VarValue::Scalar(cur)) = p.values.get(key).map(|v| &v.value) else {
            return;
        };
        let cur = to_number(cur);
        let down = amount.saturating_mul(steps).min(cur);
        if down <= 0 {
            return;
        }
        if let Some(v) = p.values.get_mut(key) {
            v.value = VarValue::Scalar((cur - down).to_string().into_bytes());
        }
        p.log.push(key, VarOp::Add(-down));
    }

    /// `setvar` on TX, which CRS runs dozens of times per request: the key and value are
    /// written in place when the variable exists, so the common case allocates nothing.
    pub(super) fn set_tx_var(&mut self, rule: &Rule, name: &crate::macros::Macro, op: &SetOp) {
        enum New {
            Bytes(Vec<u8>),
            Number(i64),
            Delete,
        }
        let (key, new) = {
            let view = self.view(Some(rule));
            let key: Cow<'_, [u8]> = match name.as_literal() {
                Some(l) if !l.iter().any(u8::is_ascii_uppercase) => Cow::Borrowed(l),
                _ => {
                    let mut k = name.expand(&view).into_owned();
                    k.make_ascii_lowercase();
                    Cow::Owned(k)
                }
            };
            let new = match op {
                SetOp::Delete => New::Delete,
                SetOp::SetOne => New::Bytes(b"1".to_vec()),
                SetOp::Set(m) => New::Bytes(m.expand(&view).into_owned()),
                SetOp::Add(m) | SetOp::Sub(m) => {
                    let delta = to_number(&m.expand(&view));
                    let delta = if matches!(op, SetOp::Sub(_)) {
                        -delta
                    } else {
                        delta
                    };
                    let cur = self.state.tx.get(&*key).map(|v| to_number(v)).unwrap_or(0);
                    New::Number(cur + delta)
                }
            };
            (key, new)
        };
        let tx = &mut self.state.tx;
        if tx.capacity() == 0 {
            // CRS sets about a hundred TX variables per request.
            tx.reserve(128);
        }
        match new {
            New::Delete => {
                tx.remove(&*key);
            }
            New::Bytes(v) => match tx.get_mut(&*key) {
                Some(slot) => *slot = v,
                None => {
                    tx.insert(key.into_owned(), v);
                }
            },
            New::Number(n) => {
                use std::io::Write;
                let slot = match tx.get_mut(&*key) {
                    Some(slot) => slot,
                    None => tx.entry(key.into_owned()).or_default(),
                };
                slot.clear();
                // Writing to a vector cannot fail.
                let _ = write!(slot, "{n}");
            }
        }
    }

    pub(super) fn set_var(
        &mut self,
        collection: CollectionKind,
        key: Vec<u8>,
        op: &SetOp,
        value: Option<Vec<u8>>,
    ) {
        if collection == CollectionKind::Tx {
            let tx = &mut self.state.tx;
            match op {
                SetOp::Delete => {
                    tx.remove(&*key);
                }
                SetOp::SetOne => {
                    tx.insert(key, b"1".to_vec());
                }
                SetOp::Set(_) => {
                    tx.insert(key, value.unwrap_or_default());
                }
                SetOp::Add(_) | SetOp::Sub(_) => {
                    let delta = to_number(&value.unwrap_or_default());
                    let delta = if matches!(op, SetOp::Sub(_)) {
                        -delta
                    } else {
                        delta
                    };
                    let cur = tx.get(&key).map(|v| to_number(v)).unwrap_or(0);
                    tx.insert(key, (cur + delta).to_string().into_bytes());
                }
            }
            return;
        }
        let Some(p) = self.state.persistent[collection.index()].as_mut() else {
            tracing::debug!("setvar on {} before initcol: ignored", collection.name());
            return;
        };
        let op = match op {
            SetOp::Delete => VarOp::Delete,
            SetOp::SetOne => VarOp::Set(b"1".to_vec()),
            SetOp::Set(_) => VarOp::Set(value.unwrap_or_default()),
            SetOp::Add(_) | SetOp::Sub(_) => {
                let delta = to_number(&value.unwrap_or_default());
                VarOp::Add(if matches!(op, SetOp::Sub(_)) {
                    delta.saturating_neg()
                } else {
                    delta
                })
            }
        };
        if key == b"timeout" {
            // TIMEOUT is the record's own field: setting it changes how long the
            // record lives without writes.
            if let VarOp::Set(v) = &op {
                let secs = to_number(v);
                p.log.set_timeout(secs);
                p.values
                    .insert(key, StoredVar::scalar(secs.to_string().into_bytes()));
            }
            return;
        }
        self.write_persistent(collection, key, op);
    }

    /// Applies one operation to an open persistent collection: to what the rules
    /// see now, and to the write log for the store.
    pub(super) fn write_persistent(&mut self, collection: CollectionKind, key: Vec<u8>, op: VarOp) {
        let now = self.now_secs();
        let Some(p) = self.state.persistent[collection.index()].as_mut() else {
            tracing::debug!("write to {} before initcol: ignored", collection.name());
            return;
        };
        let mut view = crate::collections::StoredRecord {
            vars: std::mem::take(&mut p.values),
            ..Default::default()
        };
        crate::collections::apply_op(&mut view, &key, &op, now);
        p.values = view.vars;
        p.log.push(&key, op);
    }

    pub(super) fn run_ctl(&mut self, ctl: &Ctl) {
        let s = &mut self.state;
        match ctl {
            Ctl::RuleEngine(m) => s.mode = *m,
            Ctl::RuleRemoveById(r) => s.removed_ids.add(r),
            Ctl::RuleRemoveByTag(sel) => s.removed_tags.union_with(&sel.tags),
            Ctl::RuleRemoveByMsg(m) => s.removed_msgs.push(m.clone()),
            Ctl::RuleRemoveTargetById(r, e) => s
                .target_removals
                .push((TargetRemoval::Ids(r.clone()), e.clone())),
            Ctl::RuleRemoveTargetByTag(sel, e) => s
                .target_removals
                .push((TargetRemoval::Tag(sel.tags.clone()), e.clone())),
            Ctl::RuleRemoveTargetByMsg(m, e) => s
                .target_removals
                .push((TargetRemoval::Msg(m.clone()), e.clone())),
            Ctl::RequestBodyProcessor(p) => s.body_processor = Some(*p),
            Ctl::ForceRequestBodyVariable(b) => s.force_body_variable = *b,
            Ctl::RequestBodyAccess(b) => s.request_body_access = *b,
            Ctl::ResponseBodyAccess(b) => s.response_body_access = *b,
            Ctl::RequestBodyLimit(n) => s.request_body_limit = *n,
            Ctl::AuditEngine(m) => s.audit_engine = *m,
            Ctl::AuditLogParts(p) => {
                if let Some(add) = p.strip_prefix('+') {
                    for c in add.chars() {
                        if !s.audit_parts.contains(c) {
                            s.audit_parts.push(c);
                        }
                    }
                } else if let Some(del) = p.strip_prefix('-') {
                    s.audit_parts.retain(|c| !del.contains(c));
                } else {
                    s.audit_parts = p.clone();
                }
            }
        }
    }

    pub(super) fn record_match(&mut self, rule: &Rule, phase: u8, denied_with: Option<u16>) {
        if let Some(sev) = rule.meta.severity {
            self.state.highest_severity = self.state.highest_severity.min(sev);
        }
        // A match that neither logs nor decides leaves no record (CRS's flow-control
        // rules match on every request).
        let (log, auditlog) = match self.ruleset.config().no_audit_log {
            crate::config::NoAuditLog::AuditLog => (rule.log, rule.auditlog),
            crate::config::NoAuditLog::AllLogs => (rule.v3_log, rule.v3_auditlog),
        };
        if !log && !auditlog && denied_with.is_none() {
            return;
        }
        let view = self.view(Some(rule));
        let msg = rule.meta.msg.as_ref().map(|m| m.expand_string(&view));
        let data = rule.meta.logdata.as_ref().map(|m| {
            let shown = crate::log::SHOWN_LOGDATA;
            crate::log::shown_text(&m.expand_prefix(&view, shown + 3), shown)
        });
        let record = MatchRecord {
            rule_id: rule.id,
            phase,
            file: rule.span.file.display().to_string(),
            line: rule.span.line,
            msg,
            data,
            severity: rule.meta.severity,
            tags: rule.meta.tags.clone(),
            ver: rule.meta.ver.clone(),
            rev: rule.meta.rev.clone(),
            maturity: rule.meta.maturity,
            accuracy: rule.meta.accuracy,
            operator: rule.operator_text.clone(),
            negated: rule.negated,
            var_name: crate::macros::utf8_lossy(Cow::Borrowed(&self.state.matched_var_name)),
            var_value: crate::log::shown_value(&self.state.matched_var),
            log,
            auditlog,
            denied_with,
        };
        let log_line = record
            .log
            .then(|| crate::log::error_log_line(&record, self));
        self.push_match(record, log_line);
    }
}

/// Lets a view of the transaction expand macros (used by tests of this module).
#[allow(dead_code)]
pub(super) fn expand_for_test(tx: &Transaction, m: &crate::macros::Macro) -> Vec<u8> {
    let view = tx.view(None);
    let ctx: &dyn MacroContext = &view;
    m.expand(ctx).into_owned()
}

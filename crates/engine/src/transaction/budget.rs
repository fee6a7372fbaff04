//! The per-transaction CPU budget: how much CPU time rule evaluation may take before
//! the rest of the transaction is left uninspected, and what happens then.
//!
//! The engine does no I/O, so it does not read a clock itself: the server hands a
//! transaction a [`CpuMeter`] (typically the calling thread's CPU clock) with
//! [`Transaction::set_cpu_meter`](super::Transaction::set_cpu_meter). Time is
//! accounted per phase, from the moment a phase starts to the moment it returns, so
//! the time a transaction spends waiting between phases (for the body, for the
//! response) and whatever else the thread does then are not counted.
//!
//! Reading a CPU clock costs a system call (0.3 to 0.7 µs), so the meter is not read
//! for every rule: the engine counts *work* (a fixed amount per rule and per inspected
//! value, plus one unit per byte of each value an operator inspects) and reads the
//! meter each time [`CHECK_WORK`] units have gone by. The first such reading in a phase
//! starts the phase's interval and the phase's end closes it; a phase that never
//! reaches `CHECK_WORK` units (most phases of an ordinary request) is never read at
//! all. The time accounted is therefore a lower bound, short of the truth by at most
//! the time `CHECK_WORK` units take per phase (tens of microseconds), and a
//! transaction can overrun its budget by about as much plus the longest single
//! operator call.

use std::sync::Arc;

/// A source of consumed CPU time, read by the engine to enforce and account the CPU
/// budget. Implemented by the server.
pub trait CpuMeter: Send + Sync + std::fmt::Debug {
    /// A monotonic reading in microseconds: the CPU time the calling thread has
    /// consumed so far (or, less precisely, a monotonic wall clock). Only differences
    /// between readings taken during one phase, on the thread that runs it, are used.
    fn now_micros(&self) -> u64;
}

/// What happens to a transaction whose rule evaluation exceeds its CPU budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetAction {
    /// Block: the phase returns an [`Intervention`](crate::Intervention) (`Deny`)
    /// with this status. Under `SecRuleEngine DetectionOnly` nothing is blocked and
    /// the transaction continues uninspected, as for [`BudgetAction::Pass`].
    Block {
        /// The HTTP status to answer with.
        status: u16,
    },
    /// Let the transaction continue uninspected; the server learns of it through
    /// [`Transaction::budget_exceeded`](super::Transaction::budget_exceeded), to log
    /// and count it.
    Pass,
}

/// A per-transaction limit on the CPU time of rule evaluation (body processing
/// included), and what happens beyond it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuBudget {
    /// The most CPU time, in microseconds, that the phases of one transaction may take
    /// together.
    pub limit_micros: u64,
    /// What happens once it is exceeded.
    pub action: BudgetAction,
}

/// What [`Transaction::budget_exceeded`](super::Transaction::budget_exceeded) reports
/// once a transaction went over its CPU budget: from then on no rule ran, in that
/// phase or any later one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetExceeded {
    /// The phase (1-5) in which evaluation stopped.
    pub phase: u8,
    /// The rule at which it stopped: the first rule (for a chain, the id of its first
    /// link) that did not run to completion. `None` when evaluation stopped outside
    /// any rule (after body processing, before the phase's first rule), or at a rule
    /// without an id.
    pub rule_id: Option<i64>,
    /// The CPU time accounted when the budget was found exceeded, in microseconds.
    pub used_micros: u64,
    /// The budget, in microseconds.
    pub limit_micros: u64,
    /// True when the transaction was blocked; false when it was let through
    /// uninspected ([`BudgetAction::Pass`], or `DetectionOnly`).
    pub blocked: bool,
}

/// Work units charged for each rule reached.
pub(crate) const RULE_WORK: u64 = 256;
/// Work units charged for each value inspected, on top of one per byte.
pub(crate) const VALUE_WORK: u64 = 64;
/// Work units between two readings of the meter. At a few nanoseconds per unit this
/// is a reading every 100 µs or so of evaluation: a system call per reading is then a
/// fraction of a percent.
pub const CHECK_WORK: u64 = 64 * 1024;

/// The budget's state in one transaction.
#[derive(Debug, Default)]
pub(crate) struct BudgetState {
    meter: Option<Arc<dyn CpuMeter>>,
    /// The limit in force (from the configuration, or set for this transaction).
    pub budget: Option<CpuBudget>,
    /// CPU time accounted so far, up to `mark`.
    used: u64,
    /// The meter reading at the last reading in the open phase, once there is one.
    mark: Option<u64>,
    /// A phase is running.
    open: bool,
    /// Work since the last reading.
    work: u64,
    /// The budget was found exceeded (evaluation must stop).
    tripped: bool,
    /// Set once evaluation stopped because the budget was exceeded.
    pub exceeded: Option<BudgetExceeded>,
    /// Work since the walk began or resumed, for [`crate::Transaction::set_slice`]
    /// (counted with or without a meter).
    pub slice_work: u64,
}

impl BudgetState {
    /// A state with the configured budget and no meter (nothing is accounted until
    /// one is set).
    pub fn new(budget: Option<CpuBudget>) -> Self {
        BudgetState {
            budget,
            ..Default::default()
        }
    }

    /// Sets the meter.
    pub fn set_meter(&mut self, meter: Arc<dyn CpuMeter>) {
        // Readings of another meter do not compare with this one's.
        self.mark = None;
        self.meter = Some(meter);
    }

    /// The CPU time accounted so far, when there is a meter.
    pub fn used_micros(&self) -> Option<u64> {
        self.meter.as_ref().map(|_| self.used)
    }

    /// Starts a phase (a no-op when one is already open). The meter is not read yet.
    pub fn open(&mut self) {
        if self.open || self.meter.is_none() {
            return;
        }
        self.open = true;
        self.mark = None;
        self.work = 0;
    }

    /// Ends the open phase, accounting its time since its first reading.
    pub fn close(&mut self) {
        if !self.open {
            return;
        }
        if self.mark.is_some() {
            self.read();
        }
        self.open = false;
        self.mark = None;
    }

    /// Reads the meter, adding the time since the last reading of the phase (the
    /// phase's first reading only starts its interval).
    fn read(&mut self) {
        if let Some(m) = &self.meter {
            let now = m.now_micros();
            if let Some(mark) = self.mark {
                self.used += now.saturating_sub(mark);
            }
            self.mark = Some(now);
        }
        self.work = 0;
    }

    /// Adds `units` of work; when enough has gone by since the last reading, reads the
    /// meter. True when the budget is now exceeded (it stays so).
    #[inline]
    pub fn charge(&mut self, units: u64) -> bool {
        self.slice_work += units;
        if self.tripped {
            return true;
        }
        if !self.open {
            return false;
        }
        self.work += units;
        if self.work < CHECK_WORK {
            return false;
        }
        self.over()
    }

    /// Reads the meter now if the phase has started its interval (whatever the work
    /// since the last reading). True when the budget is exceeded.
    pub fn check_now(&mut self) -> bool {
        if self.tripped {
            return true;
        }
        if !self.open || self.mark.is_none() {
            return false;
        }
        self.over()
    }

    fn over(&mut self) -> bool {
        self.read();
        self.tripped = self.budget.is_some_and(|b| self.used > b.limit_micros);
        self.tripped
    }

    /// True once the budget was found exceeded.
    pub fn tripped(&self) -> bool {
        self.tripped
    }

    /// Records where evaluation stopped. Returns the status to block with, when the
    /// transaction is to be blocked (`enforce`: the rule engine is `On`).
    pub fn stop(&mut self, phase: u8, rule_id: Option<i64>, enforce: bool) -> Option<u16> {
        if self.exceeded.is_some() {
            return None;
        }
        let budget = self.budget?;
        let status = match budget.action {
            BudgetAction::Block { status } if enforce => Some(status),
            _ => None,
        };
        self.exceeded = Some(BudgetExceeded {
            phase,
            rule_id,
            used_micros: self.used,
            limit_micros: budget.limit_micros,
            blocked: status.is_some(),
        });
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A meter that moves on by `step` at each reading.
    #[derive(Debug)]
    struct Steps {
        step: u64,
        now: AtomicU64,
    }

    impl CpuMeter for Steps {
        fn now_micros(&self) -> u64 {
            self.now.fetch_add(self.step, Ordering::Relaxed)
        }
    }

    fn state(limit: u64) -> BudgetState {
        let mut s = BudgetState::new(Some(CpuBudget {
            limit_micros: limit,
            action: BudgetAction::Pass,
        }));
        s.set_meter(Arc::new(Steps {
            step: 10,
            now: AtomicU64::new(1000),
        }));
        s
    }

    #[test]
    fn no_meter_accounts_nothing() {
        let mut s = BudgetState::new(Some(CpuBudget {
            limit_micros: 0,
            action: BudgetAction::Pass,
        }));
        s.open();
        assert!(!s.charge(10 * CHECK_WORK));
        assert!(!s.check_now());
        s.close();
        assert_eq!(s.used_micros(), None);
    }

    #[test]
    fn reads_only_after_enough_work() {
        let mut s = state(1_000_000);
        s.open();
        assert!(!s.charge(CHECK_WORK - 1));
        assert!(!s.check_now(), "no interval yet: nothing to check");
        s.close();
        assert_eq!(s.used_micros(), Some(0), "a light phase is not read at all");
        s.open();
        assert!(!s.charge(CHECK_WORK)); // reading 1000 starts the interval
        assert_eq!(s.used_micros(), Some(0));
        assert!(!s.charge(CHECK_WORK)); // reading 1010
        assert_eq!(s.used_micros(), Some(10));
        s.close(); // reading 1020
        assert_eq!(s.used_micros(), Some(20));
        // Between phases nothing is counted, and a closed phase charges nothing.
        assert!(!s.charge(CHECK_WORK));
        s.open();
        assert!(!s.charge(CHECK_WORK)); // reading 1030 starts the interval
        s.close(); // reading 1040
        assert_eq!(s.used_micros(), Some(30));
    }

    #[test]
    fn exceeding_is_sticky() {
        let mut s = state(15);
        s.open();
        assert!(!s.charge(CHECK_WORK)); // the interval starts
        assert!(!s.check_now()); // 10
        assert!(s.check_now()); // 20 > 15
        assert_eq!(
            s.stop(1, Some(7), true),
            None,
            "a passing budget blocks nothing"
        );
        let e = s.exceeded.clone().expect("recorded");
        assert_eq!(
            (e.phase, e.rule_id, e.used_micros, e.blocked),
            (1, Some(7), 20, false)
        );
        assert!(s.charge(0));
        // A second stop keeps the first record.
        s.stop(2, None, true);
        assert_eq!(s.exceeded.as_ref().map(|e| e.phase), Some(1));
    }

    #[test]
    fn block_only_when_enforcing() {
        let mut s = state(0);
        s.budget = Some(CpuBudget {
            limit_micros: 0,
            action: BudgetAction::Block { status: 503 },
        });
        s.open();
        s.charge(CHECK_WORK);
        assert!(s.check_now());
        let mut t = state(0);
        t.budget = s.budget;
        t.open();
        t.charge(CHECK_WORK);
        assert!(t.check_now());
        assert_eq!(t.stop(2, None, false), None);
        assert_eq!(t.exceeded.as_ref().map(|e| e.blocked), Some(false));
        assert_eq!(s.stop(2, None, true), Some(503));
        assert_eq!(s.exceeded.as_ref().map(|e| e.blocked), Some(true));
    }
}

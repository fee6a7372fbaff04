//! Limits that leave part of a request uninspected.
//!
//! Whenever a limit drops or truncates request data, the transaction sets the
//! variables that say so, so that rules can see it:
//!
//! | Condition | Variables |
//! |---|---|
//! | query string arguments over `SecArgumentsLimit` | `TX:MSC_ARGUMENTS_LIMIT_EXCEEDED=1` (from phase 1 on); ARGS holds the first `SecArgumentsLimit` arguments |
//! | body arguments over `SecArgumentsLimit` (URLENCODED, MULTIPART) | REQBODY_ERROR=1, REQBODY_ERROR_MSG, `TX:MSC_ARGUMENTS_LIMIT_EXCEEDED=1` |
//! | JSON arguments over `SecArgumentsLimit`, JSON deeper than `SecRequestBodyJsonDepthLimit` | REQBODY_ERROR=1, REQBODY_PROCESSOR_ERROR=1 and their messages (the parse stops, as in ModSecurity v3); `TX:MSC_ARGUMENTS_LIMIT_EXCEEDED=1` for arguments |
//! | multipart parts over the part limit | REQBODY_ERROR=1, REQBODY_PROCESSOR_ERROR=1 (a fatal multipart error) |
//! | body over `SecRequestBodyNoFilesLimit` | REQBODY_ERROR=1, REQBODY_ERROR_MSG (ModSecurity v3's message), INBOUND_DATA_ERROR=1 |
//! | body processor error (malformed body, XML entity expansion over its bound) | REQBODY_ERROR=1, REQBODY_PROCESSOR_ERROR=1 and their messages |
//!
//! `MSC_` is ModSecurity's prefix for TX flags that the engine sets on an internal
//! limit (its recommended rule 200005 denies on any of them in phase 2).
//!
//! The built-in check ([`crate::config::LimitAction`], `SecPalisadeLimitAction`)
//! then runs after the rules of phase 1 (query string) and phase 2 (body), and
//! blocks the transaction with 400, or only logs, even when no loaded rule looks at
//! those variables.

use super::{RequestData, Transaction};
use crate::actions::{AllowScope, BodyProcessor};
use crate::config::{LIMIT_BLOCK_STATUS, LimitAction, RuleEngineMode};
use crate::intervention::{Intervention, InterventionKind};
use crate::log::{LIMIT_CHECK, MatchRecord};

/// REQBODY_ERROR_MSG for a body over `SecRequestBodyNoFilesLimit` (ModSecurity v3's
/// message, so that rules and log searches written for it keep working).
pub(crate) const NO_FILES_MSG: &str =
    "Request body excluding files is bigger than the maximum expected.";

/// The TX variable (lower-case, as TX keys are kept) set to `1` when arguments were
/// dropped at `SecArgumentsLimit`.
pub const ARGUMENTS_LIMIT_TX: &str = "msc_arguments_limit_exceeded";

/// A limit that cut part of the request body short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shortfall {
    /// Arguments over `SecArgumentsLimit` were dropped.
    Arguments,
    /// The multipart body had more parts than the part limit.
    MultipartParts,
    /// The JSON body was nested deeper than `SecRequestBodyJsonDepthLimit`.
    JsonDepth,
    /// The body without its files was larger than `SecRequestBodyNoFilesLimit`.
    NoFilesLimit,
}

impl RequestData {
    /// REQBODY_ERROR_MSG: the processor's error first, else the message of a limit
    /// that cut the body short.
    pub(crate) fn reqbody_error_msg(&self) -> Option<&str> {
        self.processor_error
            .as_deref()
            .or(self.body_error.as_deref())
    }

    /// Records that a limit cut the body short; the first one is kept.
    pub(crate) fn note_shortfall(&mut self, what: Shortfall, msg: String) {
        self.shortfall.get_or_insert(what);
        self.body_error.get_or_insert(msg);
    }
}

impl Transaction {
    /// What limits the buffered request body: `SecRequestBodyLimit`, or
    /// `SecRequestBodyNoFilesLimit` (true) when it is lower and the body holds no
    /// files: its processor is URLENCODED, JSON or XML, as in ModSecurity v3. A
    /// multipart body's file-less size is known only once it is parsed (phase 2).
    pub(super) fn request_body_cap(&self) -> (usize, bool) {
        let limit = self.state.request_body_limit;
        let processor = self.state.body_processor.or(self.req.processor);
        let whole_body_counts = matches!(
            processor,
            Some(BodyProcessor::UrlEncoded | BodyProcessor::Json | BodyProcessor::Xml)
        );
        let no_files = self.no_files_limit();
        if whole_body_counts && no_files < limit {
            (no_files, true)
        } else {
            (limit, false)
        }
    }

    /// Whether going over a request body limit refuses the transaction: the limit
    /// action is Reject and the rule engine is On (ModSecurity v3 does not reject
    /// under DetectionOnly).
    pub(super) fn request_limit_rejects(&self) -> bool {
        self.ruleset.config().request_body_limit_action == crate::config::BodyLimitAction::Reject
            && self.state.mode == RuleEngineMode::On
    }

    /// The body went over `SecRequestBodyNoFilesLimit`. Sets the variables; when
    /// `reject`, also decides the transaction (413) and logs why, naming the limit.
    pub(super) fn no_files_limit_reached(
        &mut self,
        reject: bool,
        phase: u8,
    ) -> Option<Intervention> {
        self.req.inbound_data_error = true;
        self.req
            .note_shortfall(Shortfall::NoFilesLimit, NO_FILES_MSG.to_owned());
        if !reject || self.state.intervention.is_some() {
            return self.state.intervention.clone();
        }
        let what = self.describe(Shortfall::NoFilesLimit);
        self.limit_record(phase, &what, "INBOUND_DATA_ERROR", NO_FILES_MSG, Some(413));
        let i = Intervention {
            status: 413,
            kind: InterventionKind::Deny,
            rule_id: None,
            message: Some(format!("Request body refused: {what}")),
        };
        self.intervene(phase, &i);
        Some(i)
    }

    /// Sets `TX:MSC_ARGUMENTS_LIMIT_EXCEEDED` when arguments were dropped.
    pub(super) fn flag_dropped_arguments(&mut self) {
        let body_args = self.req.shortfall == Some(Shortfall::Arguments);
        if self.req.query_args_dropped || body_args {
            self.state
                .tx
                .insert(ARGUMENTS_LIMIT_TX.as_bytes().to_vec(), b"1".to_vec());
        }
    }

    /// The built-in check after the rules of `phase` (1 or 2): when a limit left part
    /// of the request uninspected, logs it and, under [`LimitAction::Block`] with the
    /// engine On, denies the transaction with [`LIMIT_BLOCK_STATUS`].
    pub(super) fn check_limits(&mut self, phase: u8) -> Option<Intervention> {
        if self.state.intervention.is_some() {
            return self.state.intervention.clone();
        }
        if self.state.mode == RuleEngineMode::Off {
            return None;
        }
        // An `allow` that covers the phase is the administrator's exception.
        match self.state.allow {
            Some(AllowScope::All) => return None,
            Some(AllowScope::Request) if phase <= 2 => return None,
            Some(AllowScope::Phase) if self.state.allow_phase == phase => return None,
            _ => {}
        }
        let (what, var, data) = match phase {
            1 if self.req.query_args_dropped => (
                format!(
                    "{} in the query string",
                    self.describe(Shortfall::Arguments)
                ),
                "TX:MSC_ARGUMENTS_LIMIT_EXCEEDED",
                String::new(),
            ),
            2 => {
                let msg = self.req.reqbody_error_msg()?;
                let what = match self.req.shortfall {
                    Some(s) => self.describe(s),
                    None => "the request body could not be parsed".to_owned(),
                };
                (what, "REQBODY_ERROR", msg.to_owned())
            }
            _ => return None,
        };
        let block = self.state.mode == RuleEngineMode::On
            && self.ruleset.config().limit_action == LimitAction::Block;
        // When nothing is blocked, the check exists so that the condition is not
        // silent; a loaded rule that already logged a match on a variable reporting it
        // (ModSecurity's 200002 on REQBODY_ERROR, say) has made it visible, and a
        // second line would only repeat it.
        if !block && self.already_reported(phase) {
            return None;
        }
        let status = block.then_some(LIMIT_BLOCK_STATUS);
        self.limit_record(phase, &what, var, &data, status);
        if !block {
            return None;
        }
        let i = Intervention {
            status: LIMIT_BLOCK_STATUS,
            kind: InterventionKind::Deny,
            rule_id: None,
            message: Some(format!("Request not fully inspected: {what}")),
        };
        self.intervene(phase, &i);
        Some(i)
    }

    /// Whether a rule of this transaction logged a match, in `phase` or before, on a
    /// variable that reports the condition the check is about in `phase`: for the
    /// query string `TX:MSC_ARGUMENTS_LIMIT_EXCEEDED`; for the body REQBODY_ERROR,
    /// REQBODY_PROCESSOR_ERROR or a `TX:MSC_` flag.
    fn already_reported(&self, phase: u8) -> bool {
        self.matches.iter().any(|m| {
            if !m.log || m.rule_id.is_none() || m.phase > phase {
                return false;
            }
            let name = m.var_name.as_str();
            match phase {
                1 => name.eq_ignore_ascii_case("TX:MSC_ARGUMENTS_LIMIT_EXCEEDED"),
                _ => {
                    name.eq_ignore_ascii_case("REQBODY_ERROR")
                        || name.eq_ignore_ascii_case("REQBODY_PROCESSOR_ERROR")
                        || name
                            .get(..7)
                            .is_some_and(|p| p.eq_ignore_ascii_case("TX:MSC_"))
                }
            }
        })
    }

    fn describe(&self, s: Shortfall) -> String {
        let cfg = self.ruleset.config();
        match s {
            Shortfall::Arguments => format!(
                "more arguments than SecArgumentsLimit ({})",
                self.arguments_limit()
            ),
            Shortfall::MultipartParts => format!(
                "more multipart parts than the part limit ({}, the larger of SecArgumentsLimit and SecUploadFileLimit)",
                self.arguments_limit().max(cfg.upload_file_limit)
            ),
            Shortfall::JsonDepth => format!(
                "JSON nested deeper than SecRequestBodyJsonDepthLimit ({})",
                self.json_depth_limit()
            ),
            Shortfall::NoFilesLimit => format!(
                "request body without files larger than SecRequestBodyNoFilesLimit ({} bytes)",
                self.no_files_limit()
            ),
        }
    }

    /// Records the check's match: an error-log line and an audit message.
    fn limit_record(&mut self, phase: u8, what: &str, var: &str, data: &str, denied: Option<u16>) {
        self.state.highest_severity = self.state.highest_severity.min(2);
        let record = MatchRecord {
            rule_id: None,
            phase,
            file: "palisade:built-in".to_owned(),
            line: 0,
            msg: Some(format!("Request not fully inspected: {what}")),
            data: (!data.is_empty()).then(|| data.to_owned()),
            severity: Some(2),
            tags: vec!["palisade/limit".to_owned()],
            ver: None,
            rev: None,
            maturity: None,
            accuracy: None,
            operator: (LIMIT_CHECK.to_owned(), what.to_owned()),
            negated: false,
            var_name: var.to_owned(),
            var_value: "1".to_owned(),
            log: true,
            auditlog: true,
            denied_with: denied,
        };
        let line = crate::log::error_log_line(&record, self);
        self.push_match(record, Some(line));
    }
}

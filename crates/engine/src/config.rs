//! Engine-wide settings from configuration directives (`SecRuleEngine`,
//! `SecRequestBodyLimit`, ...), with ModSecurity v3's defaults.

pub use crate::transaction::budget::{BudgetAction, CpuBudget};

/// `SecRuleEngine`: whether rules run and whether they may disrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleEngineMode {
    /// Rules run and disruptive actions are carried out.
    On,
    /// Rules do not run.
    Off,
    /// Rules run and log, but never disrupt.
    DetectionOnly,
}

impl RuleEngineMode {
    /// Parses `On`, `Off` or `DetectionOnly` (case-insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "on" => Some(Self::On),
            "off" => Some(Self::Off),
            "detectiononly" => Some(Self::DetectionOnly),
            _ => None,
        }
    }
}

/// What to do when a body is larger than its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLimitAction {
    /// Refuse the transaction (413 for requests, 500 for responses, as ModSecurity).
    Reject,
    /// Inspect the part within the limit and let the rest through uninspected.
    ProcessPartial,
}

/// `SecPalisadeLimitAction` (Palisade's own directive): what happens, beyond setting
/// the variables that say so, when a limit or a body processor error left part of
/// the request uninspected: arguments over `SecArgumentsLimit` (query string or
/// body), multipart parts over the part limit, JSON deeper than
/// `SecRequestBodyJsonDepthLimit`, a body over `SecRequestBodyNoFilesLimit`, or a
/// body its processor could not parse (REQBODY_ERROR, including an XML entity
/// expansion over its bound).
///
/// The check runs after the rules of the phase in which the condition is known
/// (phase 1 for the query string, phase 2 for the body), so rules such as
/// ModSecurity's recommended 200002 and 200007 decide first with their own ids. It
/// does nothing when the rule engine is off or an `allow` covers the phase, and only
/// logs under `SecRuleEngine DetectionOnly`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitAction {
    /// Deny the transaction with [`LIMIT_BLOCK_STATUS`] and log why (the default).
    Block,
    /// Log why (a warning line and an audit message) and let the transaction go on.
    Log,
}

/// `SecPalisadeRequestBodyVariable` (Palisade's own directive): which request bodies
/// REQUEST_BODY exposes.
///
/// ModSecurity v3 fills REQUEST_BODY with the raw body whatever the body processor
/// (multipart, XML, JSON, URL-encoded, or none for an unknown or missing Content-Type).
/// ModSecurity v2's manual, and the CRS v4 regression tests written against it, want it
/// only for URL-encoded bodies or under `ctl:forceRequestBodyVariable`: with v3's
/// behaviour 26 CRS v4 tests fail (944100, 944120 and 944210 on multipart bodies whose
/// raw text, boundaries and part headers included, matches the Java rules). The default
/// keeps the CRS v4 suite passing; `All` gives v3's verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestBodyVariable {
    /// URL-encoded and JSON bodies only, or any body under
    /// `ctl:forceRequestBodyVariable` (the default).
    Urlencoded,
    /// Every non-empty body the body phase saw, as ModSecurity v3.
    All,
}

/// `SecPalisadeNoAuditLog` (Palisade's own directive): what `noauditlog` (and the other
/// log flags) mean.
///
/// ModSecurity v2's manual, and the CRS v4 regression tests written against it, read
/// `noauditlog` as concerning the audit log only: CRS v4's 980170 (`log,noauditlog`)
/// must write its error-log line. libmodsecurity v3 reads the last of `log`, `nolog`,
/// `auditlog` and `noauditlog` as deciding whether a match is logged at all, so a rule
/// with `log,noauditlog` writes no line and no audit message (CRS 3's 980130 and 980140
/// are silent under nginx + libmodsecurity). The default keeps the CRS v4 suite
/// passing; `AllLogs` gives v3's logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoAuditLog {
    /// `noauditlog` keeps a match out of the audit log only (the default).
    AuditLog,
    /// As libmodsecurity v3: the last log flag decides both logs.
    AllLogs,
}

/// The status a transaction blocked by [`LimitAction::Block`] is answered with: 400,
/// as ModSecurity's recommended rules for an unparsable body answer.
pub const LIMIT_BLOCK_STATUS: u16 = 400;

/// `SecAuditEngine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditEngineMode {
    /// Every transaction is recorded.
    On,
    /// No transaction is recorded.
    Off,
    /// Transactions with a logged match or a status matching `SecAuditLogRelevantStatus`.
    RelevantOnly,
}

impl AuditEngineMode {
    /// Parses `On`, `Off` or `RelevantOnly` (case-insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "on" => Some(Self::On),
            "off" => Some(Self::Off),
            "relevantonly" => Some(Self::RelevantOnly),
            _ => None,
        }
    }
}

/// Audit log settings. Writing the records is the server's job; the engine decides
/// whether a transaction is recorded and builds the record.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    /// `SecAuditEngine`.
    pub engine: AuditEngineMode,
    /// `SecAuditLog`: where the server should write records.
    pub log_path: Option<String>,
    /// `SecAuditLogParts`, such as `ABIJDEFHZ`.
    pub parts: String,
    /// `SecAuditLogFormat`: `JSON` or `Native`; records are produced as JSON either way.
    pub format: String,
    /// `SecAuditLogType`: `Serial` or `Concurrent`.
    pub log_type: String,
    /// `SecAuditLogStorageDir`: where `Concurrent` records go, one file each.
    pub storage_dir: Option<String>,
    /// `SecAuditLogRelevantStatus`: which response statuses make a transaction
    /// relevant.
    pub relevant_status: Option<StatusPattern>,
}

/// `SecAuditLogRelevantStatus`: a PCRE pattern on the response status, as text.
///
/// The pattern is run once at load on every status from 0 to 999 (a response status
/// has three digits), and the answers are kept: matching a transaction is a table
/// lookup. That lets the patterns ModSecurity users already have, such as Debian's
/// `^(?:5|4(?!04))` with its lookahead, load unchanged; since the pattern never sees
/// request data, running it with a backtracking engine at load costs at most a
/// thousand tiny matches.
#[derive(Debug, Clone)]
pub struct StatusPattern {
    pattern: String,
    relevant: Vec<bool>,
}

impl StatusPattern {
    /// Compiles `pattern` and evaluates it on every status; an invalid pattern is an
    /// error naming it.
    pub fn new(pattern: &str) -> Result<Self, String> {
        let re = fancy_regex::Regex::new(pattern)
            .map_err(|e| format!("SecAuditLogRelevantStatus {pattern:?}: {e}"))?;
        let relevant = (0..1000u16)
            .map(|status| {
                re.is_match(&status.to_string()).map_err(|e| {
                    format!("SecAuditLogRelevantStatus {pattern:?} on status {status}: {e}")
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(StatusPattern {
            pattern: pattern.to_string(),
            relevant,
        })
    }

    /// True when a response with this status is relevant.
    pub fn matches(&self, status: u16) -> bool {
        self.relevant
            .get(usize::from(status))
            .copied()
            .unwrap_or(false)
    }

    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }
}

/// Every engine-wide setting of a rule set.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// `SecRuleEngine` (default `Off` in ModSecurity; Palisade's default is `On`, so a
    /// rule set without the directive still protects).
    pub rule_engine: RuleEngineMode,
    /// `SecRequestBodyAccess` (default off, as ModSecurity).
    pub request_body_access: bool,
    /// `SecResponseBodyAccess` (default off).
    pub response_body_access: bool,
    /// `SecResponseBodyMimeType`: inspected response content types (default
    /// `text/plain text/html`).
    pub response_body_mime_types: Vec<String>,
    /// `SecRequestBodyLimit` in bytes (default 13107200).
    pub request_body_limit: usize,
    /// `SecRequestBodyNoFilesLimit` in bytes (default 1048576).
    pub request_body_no_files_limit: usize,
    /// `SecRequestBodyLimitAction` (default Reject).
    pub request_body_limit_action: BodyLimitAction,
    /// `SecResponseBodyLimit` in bytes (default 524288).
    pub response_body_limit: usize,
    /// `SecResponseBodyLimitAction` (default Reject).
    pub response_body_limit_action: BodyLimitAction,
    /// `SecRequestBodyJsonDepthLimit` (default 10000).
    pub json_depth_limit: usize,
    /// `SecArgumentsLimit` (default 1000).
    pub arguments_limit: usize,
    /// `SecArgumentSeparator` (default `&`).
    pub argument_separator: u8,
    /// `SecUploadFileLimit`: most file parts in a multipart body (default 100).
    pub upload_file_limit: usize,
    /// `SecPalisadeLimitAction` (default [`LimitAction::Block`]).
    pub limit_action: LimitAction,
    /// `SecPalisadeRequestBodyVariable` (default [`RequestBodyVariable::Urlencoded`]).
    pub request_body_variable: RequestBodyVariable,
    /// `SecPalisadeNoAuditLog` (default [`NoAuditLog::AuditLog`]).
    pub no_audit_log: NoAuditLog,
    /// `SecUnicodeMapFile FILE CODEPAGE`: the table `t:urlDecodeUni` maps `%uHHHH`
    /// through (none by default: the low byte, as ModSecurity without a map).
    pub unicode_map: Option<std::sync::Arc<crate::transforms::UnicodeMap>>,
    /// `SecGeoLookupDb FILE`: the MaxMind database `@geoLookup` reads (none by
    /// default: `@geoLookup` never matches).
    pub geo_db: Option<std::sync::Arc<crate::lookups::GeoDb>>,
    /// `SecHttpBlKey KEY`: the access key of http:BL zones in `@rbl`.
    pub httpbl_key: Option<String>,
    /// Audit log settings.
    pub audit: AuditConfig,
    /// `SecCollectionTimeout` in seconds (default 3600).
    pub collection_timeout: u64,
    /// `SecWebAppId`: the application namespace of persistent records (default
    /// `default`).
    pub web_app_id: String,
    /// `SecComponentSignature` values, in order.
    pub component_signatures: Vec<String>,
    /// `SecDebugLog`: the debug log file (the server writes it).
    pub debug_log: Option<String>,
    /// `SecDebugLogLevel`, 0 (nothing, the default) to 9 (everything).
    pub debug_log_level: u8,
    /// `SecDataDir`, `SecTmpDir`, `SecUploadDir` and the like: kept as given, for the
    /// server to use or report.
    pub other: Vec<(String, Vec<String>)>,
    /// The per-transaction CPU budget (Palisade's own `SecPalisadeCpuBudget`; default
    /// none). Enforced only in transactions given a meter
    /// ([`Transaction::set_cpu_meter`](crate::Transaction::set_cpu_meter)).
    pub cpu_budget: Option<CpuBudget>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            rule_engine: RuleEngineMode::On,
            request_body_access: false,
            response_body_access: false,
            response_body_mime_types: vec!["text/plain".into(), "text/html".into()],
            request_body_limit: 13_107_200,
            request_body_no_files_limit: 1_048_576,
            request_body_limit_action: BodyLimitAction::Reject,
            response_body_limit: 524_288,
            response_body_limit_action: BodyLimitAction::Reject,
            json_depth_limit: 10_000,
            arguments_limit: 1000,
            argument_separator: b'&',
            upload_file_limit: 100,
            limit_action: LimitAction::Block,
            request_body_variable: RequestBodyVariable::Urlencoded,
            no_audit_log: NoAuditLog::AuditLog,
            unicode_map: None,
            geo_db: None,
            httpbl_key: None,
            audit: AuditConfig {
                engine: AuditEngineMode::Off,
                log_path: None,
                parts: "ABIJDEFHZ".into(),
                format: "JSON".into(),
                log_type: "Serial".into(),
                storage_dir: None,
                relevant_status: None,
            },
            collection_timeout: 3600,
            web_app_id: crate::collections::DEFAULT_APP.to_string(),
            component_signatures: Vec::new(),
            debug_log: None,
            debug_log_level: 0,
            other: Vec::new(),
            cpu_budget: None,
        }
    }
}

/// The outcome of applying a setting.
pub(crate) enum SettingOutcome {
    /// Applied.
    Applied,
    /// Accepted and ignored, as ModSecurity v3 does; the text says why.
    Ignored(String),
}

fn on_off(name: &str, value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{name}: expected On or Off, got {value:?}")),
    }
}

fn size(name: &str, value: &str) -> Result<usize, String> {
    value
        .trim()
        .parse::<usize>()
        .map_err(|_| format!("{name}: expected a size in bytes, got {value:?}"))
}

fn limit_action(name: &str, value: &str) -> Result<BodyLimitAction, String> {
    match value.to_ascii_lowercase().as_str() {
        "reject" => Ok(BodyLimitAction::Reject),
        "processpartial" => Ok(BodyLimitAction::ProcessPartial),
        _ => Err(format!(
            "{name}: expected Reject or ProcessPartial, got {value:?}"
        )),
    }
}

/// Parses `SecPalisadeCpuBudget Off`, `SecPalisadeCpuBudget MICROSECONDS Pass` or
/// `SecPalisadeCpuBudget MICROSECONDS Block [STATUS]` (status 403 unless given).
fn cpu_budget(args: &[String]) -> Result<Option<CpuBudget>, String> {
    const NAME: &str = "SecPalisadeCpuBudget";
    let usage = "expected Off, MICROSECONDS Pass, or MICROSECONDS Block [STATUS]";
    match args {
        [off] if off.eq_ignore_ascii_case("off") => return Ok(None),
        [_, _] | [_, _, _] => {}
        _ => return Err(format!("{NAME}: {usage}, got {args:?}")),
    }
    let limit_micros = args[0].trim().parse::<u64>().map_err(|_| {
        format!(
            "{NAME}: expected the budget in microseconds, got {:?}",
            args[0]
        )
    })?;
    let action = match (args[1].to_ascii_lowercase().as_str(), args.get(2)) {
        ("pass", None) => BudgetAction::Pass,
        ("block", status) => {
            let status = match status {
                None => 403,
                Some(s) => s
                    .trim()
                    .parse::<u16>()
                    .ok()
                    .filter(|s| (100..=599).contains(s))
                    .ok_or_else(|| format!("{NAME}: expected an HTTP status, got {s:?}"))?,
            };
            BudgetAction::Block { status }
        }
        _ => return Err(format!("{NAME}: {usage}, got {args:?}")),
    };
    Ok(Some(CpuBudget {
        limit_micros,
        action,
    }))
}

impl EngineConfig {
    /// Applies one configuration directive. Unknown names and bad values are errors.
    pub(crate) fn apply(&mut self, name: &str, args: &[String]) -> Result<SettingOutcome, String> {
        let first = args.first().map(String::as_str).unwrap_or("");
        match name {
            "SecRuleEngine" => {
                self.rule_engine = RuleEngineMode::parse(first).ok_or_else(|| {
                    format!("SecRuleEngine: expected On, Off or DetectionOnly, got {first:?}")
                })?
            }
            "SecRequestBodyAccess" => self.request_body_access = on_off(name, first)?,
            "SecResponseBodyAccess" => self.response_body_access = on_off(name, first)?,
            "SecResponseBodyMimeType" => {
                for arg in args {
                    for t in arg.split_whitespace() {
                        let t = t.to_ascii_lowercase();
                        if !self.response_body_mime_types.contains(&t) {
                            self.response_body_mime_types.push(t);
                        }
                    }
                }
            }
            "SecResponseBodyMimeTypesClear" => self.response_body_mime_types.clear(),
            "SecRequestBodyLimit" => self.request_body_limit = size(name, first)?,
            "SecRequestBodyNoFilesLimit" => self.request_body_no_files_limit = size(name, first)?,
            "SecRequestBodyLimitAction" => {
                self.request_body_limit_action = limit_action(name, first)?
            }
            "SecResponseBodyLimit" => self.response_body_limit = size(name, first)?,
            "SecResponseBodyLimitAction" => {
                self.response_body_limit_action = limit_action(name, first)?
            }
            "SecRequestBodyJsonDepthLimit" => self.json_depth_limit = size(name, first)?,
            "SecArgumentsLimit" => self.arguments_limit = size(name, first)?,
            "SecUploadFileLimit" => self.upload_file_limit = size(name, first)?,
            "SecPalisadeLimitAction" => {
                self.limit_action = match first.to_ascii_lowercase().as_str() {
                    "block" => LimitAction::Block,
                    "log" => LimitAction::Log,
                    _ => {
                        return Err(format!(
                            "SecPalisadeLimitAction: expected Block or Log, got {first:?}"
                        ));
                    }
                }
            }
            "SecPalisadeRequestBodyVariable" => {
                self.request_body_variable = match first.to_ascii_lowercase().as_str() {
                    "urlencoded" => RequestBodyVariable::Urlencoded,
                    "all" => RequestBodyVariable::All,
                    _ => {
                        return Err(format!(
                            "SecPalisadeRequestBodyVariable: expected Urlencoded or All, got {first:?}"
                        ));
                    }
                }
            }
            "SecPalisadeNoAuditLog" => {
                self.no_audit_log = match first.to_ascii_lowercase().as_str() {
                    "auditlog" => NoAuditLog::AuditLog,
                    "alllogs" => NoAuditLog::AllLogs,
                    _ => {
                        return Err(format!(
                            "SecPalisadeNoAuditLog: expected AuditLog or AllLogs, got {first:?}"
                        ));
                    }
                }
            }
            "SecArgumentSeparator" => {
                let b = first.as_bytes();
                if b.len() != 1 {
                    return Err(format!(
                        "SecArgumentSeparator: expected one character, got {first:?}"
                    ));
                }
                self.argument_separator = b[0];
            }
            "SecAuditEngine" => {
                self.audit.engine = AuditEngineMode::parse(first).ok_or_else(|| {
                    format!("SecAuditEngine: expected On, Off or RelevantOnly, got {first:?}")
                })?
            }
            "SecAuditLog" => self.audit.log_path = Some(first.to_string()),
            "SecAuditLogParts" => {
                if !first.chars().all(|c| "ABCDEFGHIJKZ".contains(c)) {
                    return Err(format!("SecAuditLogParts: unknown part in {first:?}"));
                }
                self.audit.parts = first.to_string();
            }
            "SecAuditLogFormat" => match first.to_ascii_lowercase().as_str() {
                "json" | "native" => self.audit.format = first.to_string(),
                _ => {
                    return Err(format!(
                        "SecAuditLogFormat: expected JSON or Native, got {first:?}"
                    ));
                }
            },
            "SecAuditLogType" => match first.to_ascii_lowercase().as_str() {
                "serial" | "concurrent" | "https" => self.audit.log_type = first.to_string(),
                _ => {
                    return Err(format!(
                        "SecAuditLogType: expected Serial or Concurrent, got {first:?}"
                    ));
                }
            },
            "SecAuditLogStorageDir" => self.audit.storage_dir = Some(first.to_string()),
            "SecDebugLog" => self.debug_log = Some(first.to_string()),
            "SecDebugLogLevel" => {
                self.debug_log_level = first.parse().ok().filter(|l| *l <= 9).ok_or_else(|| {
                    format!("SecDebugLogLevel: expected a level from 0 to 9, got {first:?}")
                })?
            }
            "SecAuditLogRelevantStatus" => {
                self.audit.relevant_status = Some(StatusPattern::new(first)?);
            }
            "SecCollectionTimeout" => {
                self.collection_timeout = first
                    .parse()
                    .map_err(|_| format!("SecCollectionTimeout: expected seconds, got {first:?}"))?
            }
            "SecWebAppId" => {
                if first.is_empty() || first.contains('\0') {
                    return Err(format!("SecWebAppId: {first:?} cannot name records"));
                }
                self.web_app_id = first.to_string();
            }
            "SecComponentSignature" => self.component_signatures.push(first.to_string()),
            "SecHttpBlKey" => {
                if first.is_empty() || !first.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    return Err(format!(
                        "SecHttpBlKey: {first:?} is not an access key (letters and digits)"
                    ));
                }
                self.httpbl_key = Some(first.to_string());
            }
            "SecPalisadeCpuBudget" => self.cpu_budget = cpu_budget(args)?,
            "SecDataDir"
            | "SecTmpDir"
            | "SecUploadDir"
            | "SecUnicodeCodePage"
            | "SecAuditLogDirMode"
            | "SecAuditLogFileMode"
            | "SecUploadKeepFiles"
            | "SecUploadFileMode"
            | "SecTmpSaveUploadedFiles"
            | "SecAuditLog2" => self.other.push((name.to_string(), args.to_vec())),
            "SecRequestBodyInMemoryLimit"
            | "SecServerSignature"
            | "SecStatusEngine"
            | "SecPcreMatchLimit"
            | "SecPcreMatchLimitRecursion"
            | "SecConnEngine"
            | "SecCookieFormat"
            | "SecXmlExternalEntity"
            | "SecSensorId"
            | "SecInterceptOnError"
            | "SecRuleInheritance"
            | "SecRulePerfTime"
            | "SecStreamInBodyInspection"
            | "SecStreamOutBodyInspection"
            | "SecContentInjection"
            | "SecDisableBackendCompression"
            | "SecGuardianLog"
            | "SecHashEngine"
            | "SecHashKey"
            | "SecHashParam"
            | "SecHashMethodRx"
            | "SecHashMethodPm"
            | "SecGsbLookupDb"
            | "SecRemoteRulesFailAction" => {
                return Ok(SettingOutcome::Ignored(format!(
                    "{name} is accepted and ignored (as ModSecurity v3 does or Palisade does not need it)"
                )));
            }
            "SecRemoteRules" => {
                return Err(
                    "SecRemoteRules: fetching rules over the network is not supported".into(),
                );
            }
            _ => return Err(format!("unsupported directive {name}")),
        }
        Ok(SettingOutcome::Applied)
    }
}

#[cfg(test)]
mod tests {
    use super::StatusPattern;

    #[test]
    fn relevant_status_patterns_with_lookahead_load_and_match() {
        // Debian's stock modsecurity.conf.
        let p = StatusPattern::new("^(?:5|4(?!04))").unwrap();
        for (status, relevant) in [
            (500, true),
            (503, true),
            (403, true),
            (404, false),
            (200, false),
            (304, false),
        ] {
            assert_eq!(p.matches(status), relevant, "{status}");
        }
        assert!(!p.matches(1000));
        assert_eq!(p.pattern(), "^(?:5|4(?!04))");
        let e = StatusPattern::new("^(5").unwrap_err();
        assert!(e.contains("SecAuditLogRelevantStatus \"^(5\""), "{e}");
    }
}

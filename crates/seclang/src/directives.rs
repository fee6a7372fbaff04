//! The directives Palisade knows, with their canonical spelling and how many arguments
//! each takes.

/// How many arguments a directive takes: at least `min`, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arity {
    pub min: usize,
    pub max: usize,
    /// How the count is described in an error message.
    pub describe: &'static str,
}

const NONE: Arity = Arity {
    min: 0,
    max: 0,
    describe: "no arguments",
};
const ONE: Arity = Arity {
    min: 1,
    max: 1,
    describe: "1 argument",
};
const TWO: Arity = Arity {
    min: 2,
    max: 2,
    describe: "2 arguments",
};
const ONE_OR_TWO: Arity = Arity {
    min: 1,
    max: 2,
    describe: "1 or 2 arguments",
};
const TWO_OR_THREE: Arity = Arity {
    min: 2,
    max: 3,
    describe: "2 or 3 arguments",
};
const ONE_TO_THREE: Arity = Arity {
    min: 1,
    max: 3,
    describe: "1 to 3 arguments",
};
const ONE_OR_MORE: Arity = Arity {
    min: 1,
    max: usize::MAX,
    describe: "at least 1 argument",
};
const TWO_OR_MORE: Arity = Arity {
    min: 2,
    max: usize::MAX,
    describe: "at least 2 arguments",
};

impl Arity {
    /// True when `n` arguments are acceptable.
    pub(crate) fn accepts(&self, n: usize) -> bool {
        self.min <= n && n <= self.max
    }
}

/// Every known directive: canonical name and argument count. Names are matched
/// case-insensitively.
const DIRECTIVES: &[(&str, Arity)] = &[
    // Rules and rule management, handled by the parser itself.
    ("SecRule", TWO_OR_THREE),
    ("SecAction", ONE),
    ("SecMarker", ONE),
    ("SecDefaultAction", ONE),
    ("SecRuleRemoveById", ONE_OR_MORE),
    ("SecRuleRemoveByTag", ONE),
    ("SecRuleRemoveByMsg", ONE),
    // Ids (one or more arguments), targets, and optionally the replaced target.
    ("SecRuleUpdateTargetById", TWO_OR_MORE),
    ("SecRuleUpdateTargetByTag", TWO_OR_THREE),
    ("SecRuleUpdateTargetByMsg", TWO_OR_THREE),
    ("SecRuleUpdateActionById", TWO),
    ("Include", ONE),
    ("IncludeOptional", ONE),
    // Settings.
    ("SecRuleEngine", ONE),
    ("SecRequestBodyAccess", ONE),
    ("SecResponseBodyAccess", ONE),
    ("SecResponseBodyMimeType", ONE_OR_MORE),
    ("SecResponseBodyMimeTypesClear", NONE),
    ("SecRequestBodyLimit", ONE),
    ("SecRequestBodyNoFilesLimit", ONE),
    ("SecRequestBodyInMemoryLimit", ONE),
    ("SecRequestBodyLimitAction", ONE),
    ("SecResponseBodyLimit", ONE),
    ("SecResponseBodyLimitAction", ONE),
    ("SecRequestBodyJsonDepthLimit", ONE),
    ("SecArgumentsLimit", ONE),
    // Palisade's own: what a limit that left data uninspected does (Block or Log).
    ("SecPalisadeLimitAction", ONE),
    // Palisade's own: which bodies REQUEST_BODY exposes (Urlencoded or All).
    ("SecPalisadeRequestBodyVariable", ONE),
    // Palisade's own: what noauditlog silences (AuditLog, or AllLogs as libmodsecurity v3).
    ("SecPalisadeNoAuditLog", ONE),
    ("SecArgumentSeparator", ONE),
    ("SecCookieFormat", ONE),
    ("SecAuditEngine", ONE),
    ("SecAuditLog", ONE),
    ("SecAuditLog2", ONE),
    ("SecAuditLogParts", ONE),
    ("SecAuditLogFormat", ONE),
    ("SecAuditLogType", ONE),
    ("SecAuditLogRelevantStatus", ONE),
    ("SecAuditLogStorageDir", ONE),
    ("SecAuditLogDirMode", ONE),
    ("SecAuditLogFileMode", ONE),
    ("SecCollectionTimeout", ONE),
    ("SecUnicodeMapFile", ONE_OR_TWO),
    ("SecUnicodeCodePage", ONE),
    ("SecDataDir", ONE),
    ("SecTmpDir", ONE),
    ("SecUploadDir", ONE),
    ("SecUploadKeepFiles", ONE),
    ("SecUploadFileMode", ONE),
    ("SecUploadFileLimit", ONE),
    ("SecTmpSaveUploadedFiles", ONE),
    ("SecDebugLog", ONE),
    ("SecDebugLogLevel", ONE),
    ("SecComponentSignature", ONE),
    ("SecServerSignature", ONE),
    ("SecStatusEngine", ONE),
    ("SecPcreMatchLimit", ONE),
    ("SecPcreMatchLimitRecursion", ONE),
    ("SecGeoLookupDb", ONE),
    ("SecHashEngine", ONE),
    // `SecHashKey rand|TEXT [KeyOnly|SessionID|RemoteIP]`.
    ("SecHashKey", ONE_OR_TWO),
    ("SecHashParam", ONE),
    // `SecHashMethodRx TYPE REGEX`, `SecHashMethodPm TYPE "WORDS"`.
    ("SecHashMethodRx", TWO),
    ("SecHashMethodPm", TWO),
    ("SecConnEngine", ONE),
    ("SecXmlExternalEntity", ONE),
    ("SecWebAppId", ONE),
    ("SecSensorId", ONE),
    ("SecHttpBlKey", ONE),
    // `SecRemoteRules [crypto] KEY URL`.
    ("SecRemoteRules", TWO_OR_THREE),
    ("SecRemoteRulesFailAction", ONE),
    ("SecInterceptOnError", ONE),
    ("SecRuleInheritance", ONE),
    ("SecRulePerfTime", ONE),
    ("SecStreamInBodyInspection", ONE),
    ("SecStreamOutBodyInspection", ONE),
    ("SecContentInjection", ONE),
    ("SecDisableBackendCompression", ONE),
    ("SecGsbLookupDb", ONE),
    ("SecGuardianLog", ONE),
    // Palisade's own: `SecPalisadeCpuBudget Off|MICROS Pass|MICROS Block [STATUS]`.
    ("SecPalisadeCpuBudget", ONE_TO_THREE),
];

/// Looks a directive name up, ignoring case. Returns its canonical spelling and arity.
pub(crate) fn lookup(name: &str) -> Option<(&'static str, Arity)> {
    DIRECTIVES
        .iter()
        .find(|(canonical, _)| canonical.eq_ignore_ascii_case(name))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_ignores_case() {
        assert_eq!(lookup("secruleengine").map(|d| d.0), Some("SecRuleEngine"));
        assert_eq!(
            lookup("SECGEOLOOKUPDB").map(|d| d.0),
            Some("SecGeoLookupDb")
        );
        assert_eq!(lookup("SecFoo"), None);
    }

    #[test]
    fn names_are_unique() {
        for (i, (a, _)) in DIRECTIVES.iter().enumerate() {
            for (b, _) in &DIRECTIVES[i + 1..] {
                assert!(!a.eq_ignore_ascii_case(b), "{a} listed twice");
            }
        }
    }

    #[test]
    fn arity() {
        assert!(ONE.accepts(1) && !ONE.accepts(0) && !ONE.accepts(2));
        assert!(NONE.accepts(0) && !NONE.accepts(1));
        assert!(ONE_OR_MORE.accepts(5) && !ONE_OR_MORE.accepts(0));
    }
}

//! Actions: what a rule does when it matches, compiled from the action list.

use crate::config::{AuditEngineMode, RuleEngineMode};
use crate::macros::Macro;
use crate::variables::Exclusion;
use seclang::IdRange;

/// The persistent and transaction collections that `setvar` and friends write to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CollectionKind {
    /// TX: the transaction's own variables.
    Tx,
    /// IP: per client address (persistent, after `initcol`).
    Ip,
    /// GLOBAL (persistent).
    Global,
    /// SESSION (persistent, after `setsid`).
    Session,
    /// USER (persistent, after `setuid`).
    User,
    /// RESOURCE (persistent).
    Resource,
}

impl CollectionKind {
    /// Parses a collection name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_uppercase().as_str() {
            "TX" => Some(Self::Tx),
            "IP" => Some(Self::Ip),
            "GLOBAL" => Some(Self::Global),
            "SESSION" => Some(Self::Session),
            "USER" => Some(Self::User),
            "RESOURCE" => Some(Self::Resource),
            _ => None,
        }
    }

    /// The upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tx => "TX",
            Self::Ip => "IP",
            Self::Global => "GLOBAL",
            Self::Session => "SESSION",
            Self::User => "USER",
            Self::Resource => "RESOURCE",
        }
    }

    /// Index into per-transaction arrays of collections.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The operation of a `setvar`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetOp {
    /// `=value`.
    Set(Macro),
    /// `=+value`.
    Add(Macro),
    /// `=-value`.
    Sub(Macro),
    /// No `=`: set to 1 (ModSecurity v3).
    SetOne,
    /// `!name`: delete.
    Delete,
}

/// `ctl:` actions: per-transaction changes of configuration.
#[derive(Debug, Clone)]
pub enum Ctl {
    /// `ctl:ruleEngine=On|Off|DetectionOnly`.
    RuleEngine(RuleEngineMode),
    /// `ctl:ruleRemoveById=ID|RANGE`.
    RuleRemoveById(Vec<IdRange>),
    /// `ctl:ruleRemoveByTag=TAG` (a regular expression on tags, as ModSecurity v3).
    RuleRemoveByTag(crate::ruleset::tags::TagSelector),
    /// `ctl:ruleRemoveByMsg=MSG`.
    RuleRemoveByMsg(String),
    /// `ctl:ruleRemoveTargetById=ID;TARGET`.
    RuleRemoveTargetById(Vec<IdRange>, Exclusion),
    /// `ctl:ruleRemoveTargetByTag=TAG;TARGET`.
    RuleRemoveTargetByTag(crate::ruleset::tags::TagSelector, Exclusion),
    /// `ctl:ruleRemoveTargetByMsg=MSG;TARGET`.
    RuleRemoveTargetByMsg(String, Exclusion),
    /// `ctl:requestBodyProcessor=URLENCODED|MULTIPART|XML|JSON`.
    RequestBodyProcessor(BodyProcessor),
    /// `ctl:forceRequestBodyVariable=On|Off`.
    ForceRequestBodyVariable(bool),
    /// `ctl:requestBodyAccess=On|Off`.
    RequestBodyAccess(bool),
    /// `ctl:responseBodyAccess=On|Off`.
    ResponseBodyAccess(bool),
    /// `ctl:requestBodyLimit=N`.
    RequestBodyLimit(usize),
    /// `ctl:auditEngine=On|Off|RelevantOnly`.
    AuditEngine(AuditEngineMode),
    /// `ctl:auditLogParts=+E` or `=ABC`.
    AuditLogParts(String),
}

/// The request body processors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyProcessor {
    /// `application/x-www-form-urlencoded`.
    UrlEncoded,
    /// `multipart/form-data`.
    Multipart,
    /// XML.
    Xml,
    /// JSON.
    Json,
}

impl BodyProcessor {
    /// Parses a processor name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_uppercase().as_str() {
            "URLENCODED" => Some(Self::UrlEncoded),
            "MULTIPART" => Some(Self::Multipart),
            "XML" => Some(Self::Xml),
            "JSON" => Some(Self::Json),
            _ => None,
        }
    }

    /// The name REQBODY_PROCESSOR shows.
    pub fn name(self) -> &'static str {
        match self {
            Self::UrlEncoded => "URLENCODED",
            Self::Multipart => "MULTIPART",
            Self::Xml => "XML",
            Self::Json => "JSON",
        }
    }
}

/// A non-disruptive action that changes state.
#[derive(Debug, Clone)]
pub enum Action {
    /// `setvar`.
    SetVar {
        /// Which collection.
        collection: CollectionKind,
        /// The variable name (may hold macros).
        name: Macro,
        /// What to do.
        op: SetOp,
    },
    /// `setenv:name=value`.
    SetEnv {
        /// Variable name.
        name: String,
        /// Value.
        value: Macro,
    },
    /// `expirevar:coll.name=seconds`.
    ExpireVar {
        /// Which collection.
        collection: CollectionKind,
        /// The variable name.
        name: Macro,
        /// Seconds from now.
        seconds: Macro,
    },
    /// `deprecatevar:coll.name=N/S`: decrease by N every S seconds.
    DeprecateVar {
        /// Which collection.
        collection: CollectionKind,
        /// The variable name.
        name: Macro,
        /// `N/S`.
        spec: Macro,
    },
    /// `addmember:coll.name=value` / `delmember:coll.name=value`: adds a value to,
    /// or removes it from, a multi-valued variable of a persistent collection (a
    /// Palisade extension; test membership with `@memberOf coll.name`).
    Member {
        /// Which collection (not TX).
        collection: CollectionKind,
        /// The variable name.
        name: Macro,
        /// The member.
        value: Macro,
        /// True for `addmember`, false for `delmember`.
        add: bool,
    },
    /// `initcol:coll=key`.
    InitCol {
        /// Which collection.
        collection: CollectionKind,
        /// The key the collection is stored under.
        key: Macro,
    },
    /// `setuid:value`: initialises USER.
    SetUid(Macro),
    /// `setsid:value`: initialises SESSION.
    SetSid(Macro),
    /// `ctl:`.
    Ctl(Ctl),
}

/// How `allow` lets a transaction through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowScope {
    /// `allow`: skip all remaining rules of phases 1-4.
    All,
    /// `allow:phase`: skip the rest of the current phase.
    Phase,
    /// `allow:request`: skip the rest of the request phases (1 and 2).
    Request,
}

/// The disruptive action of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Disruptive {
    /// `pass`: go on with the next rule.
    #[default]
    Pass,
    /// `deny`: stop with the rule's status (403 by default).
    Deny,
    /// `drop`: close the connection.
    Drop,
    /// `block`: do what the phase's `SecDefaultAction` says.
    Block,
    /// `allow`.
    Allow(AllowScope),
    /// `redirect:URL`.
    Redirect(Macro),
}

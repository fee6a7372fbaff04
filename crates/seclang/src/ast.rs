//! The syntax tree: what a SecLang file says, before any meaning is given to it.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Where something was written: a file, a 1-based line and a 1-based column.
///
/// For a directive spread over several lines with `\` continuations, the line is the
/// line where the directive starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Span {
    /// The file the directive was read from (as given to the parser or resolved from
    /// an `Include`).
    pub file: Arc<PathBuf>,
    /// 1-based line number.
    pub line: u32,
    /// 1-based column number.
    pub column: u32,
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

/// One directive, with the place it came from. `Include` never appears here: the
/// parser replaces it with the directives of the included files.
#[derive(Debug, Clone, PartialEq)]
pub struct Directive {
    /// Where the directive starts.
    pub span: Span,
    /// What the directive says.
    pub kind: DirectiveKind,
}

/// The directives Palisade understands. Each configuration directive that takes plain
/// arguments is a [`DirectiveKind::Setting`]; the parser checks its name against the
/// list of known directives and its argument count, the engine checks the values.
#[derive(Debug, Clone, PartialEq)]
pub enum DirectiveKind {
    /// `SecRule VARIABLES "OPERATOR" "ACTIONS"`.
    Rule(RuleDef),
    /// `SecAction "ACTIONS"`: a rule with no variables that always matches.
    Action(Vec<ActionDef>),
    /// `SecMarker NAME`: a target for `skipAfter`.
    Marker(String),
    /// `SecDefaultAction "ACTIONS"`: the default actions of a phase.
    DefaultAction(Vec<ActionDef>),
    /// `SecRuleRemoveById`, `SecRuleRemoveByTag`, `SecRuleRemoveByMsg`.
    RuleRemove(RuleSelector),
    /// `SecRuleUpdateTargetById|ByTag|ByMsg SELECTOR "TARGETS" ["REPLACED"]`.
    RuleUpdateTarget {
        /// Which rules are updated.
        selector: RuleSelector,
        /// Targets to append (or, with a `!`, to exclude).
        targets: Vec<VariableDef>,
        /// ModSecurity's optional third argument: the target to replace.
        replaced: Option<Vec<VariableDef>>,
    },
    /// `SecRuleUpdateActionById ID[:CHAIN_OFFSET] "ACTIONS"`.
    RuleUpdateAction {
        /// The rule id whose actions are updated.
        id: i64,
        /// The new actions; they replace actions of the same name.
        actions: Vec<ActionDef>,
    },
    /// Every other directive: its canonical name (as in ModSecurity's reference
    /// manual, e.g. `SecRequestBodyLimit`) and its arguments with quotes removed.
    Setting {
        /// Canonical directive name.
        name: String,
        /// Arguments, unquoted.
        args: Vec<String>,
    },
}

/// Which rules a removal or update applies to.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleSelector {
    /// Ids and id ranges (`SecRuleRemoveById 1 2 100-200`).
    Ids(Vec<IdRange>),
    /// Rules that carry a tag matching this text (a regular expression in ModSecurity
    /// v3, compared against each tag).
    Tag(String),
    /// Rules whose `msg` matches this text.
    Msg(String),
}

/// An inclusive range of rule ids; a single id is `start == end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    /// First id.
    pub start: i64,
    /// Last id, inclusive.
    pub end: i64,
}

impl IdRange {
    /// True when `id` is inside the range.
    pub fn contains(&self, id: i64) -> bool {
        self.start <= id && id <= self.end
    }
}

/// A `SecRule`: variables, operator and actions.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleDef {
    /// The targets, in the order written.
    pub variables: Vec<VariableDef>,
    /// The operator.
    pub operator: OperatorDef,
    /// The actions, in the order written. Empty when the rule has no action string.
    pub actions: Vec<ActionDef>,
}

/// One target of a rule, such as `ARGS`, `!ARGS:foo`, `&TX:bar`, `ARGS:/^id_/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableDef {
    /// `&`: count the matching values instead of inspecting them.
    pub count: bool,
    /// `!`: remove the matching values from the rule's targets.
    pub exclude: bool,
    /// The collection or variable name, upper-cased (`ARGS`, `REQUEST_HEADERS`, `TX`).
    pub name: String,
    /// The part after the colon, if any.
    pub selector: Option<Selector>,
}

/// What follows `NAME:` in a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// An exact key (compared case-insensitively for most collections), quotes removed.
    Key(String),
    /// A `/regex/` key, without the slashes.
    Regex(String),
}

/// The operator of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorDef {
    /// `!@op`: the result is negated.
    pub negated: bool,
    /// The operator name without `@`, as written (`rx`, `pmFromFile`). A rule whose
    /// operator string has no `@` gets `rx`.
    pub name: String,
    /// The argument, as written after the name and the blanks that follow it (may be
    /// empty). For an operator string without `@`, the whole string.
    pub argument: String,
}

/// One action, such as `id:942100`, `t:lowercase`, `setvar:'tx.score=+%{tx.x}'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionDef {
    /// The action name as written (`id`, `t`, `setvar`, `ctl`). Case is preserved;
    /// the engine compares names case-insensitively.
    pub name: String,
    /// The value after the first colon, with surrounding single quotes removed.
    pub value: Option<String>,
}

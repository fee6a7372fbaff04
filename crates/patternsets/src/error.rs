//! Why a set or a phrase automaton cannot be built. A leaf: the other modules of
//! the crate depend on it, and it on none of them.

use rxlinear::RxError;

/// Why a pattern set ([`RxSet`](crate::RxSet)) or a phrase automaton
/// ([`Pm`](crate::Pm), [`PhraseLists`](crate::PhraseLists)) cannot be
/// built. The text of each is the reason, as the operators report it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    /// One of the patterns is not valid on its own.
    #[error(transparent)]
    Pattern(#[from] RxError),
    /// The set's NFA would exceed this many bytes.
    #[error("pattern set too large: its compiled form exceeds {0} bytes")]
    TooLarge(usize),
    /// The set's NFA could not be built for another reason; the compiler's message.
    #[error("invalid regular expression: {0}")]
    Invalid(String),
    /// The set's lazy DFA could not be built; the library's message.
    #[error("cannot build the automaton: {0}")]
    Automaton(String),
    /// An Aho-Corasick automaton over phrases could not be built; the library's
    /// message.
    #[error("cannot build the phrase matcher: {0}")]
    Phrases(String),
    /// The phrases of a union hold more distinct bytes than its tables can name.
    #[error("too many distinct bytes in the phrases")]
    TooManyBytes,
    /// A shared set was given this index of a pattern the larger set does not have.
    #[error("pattern {0} is not in the larger set")]
    NotInLarger(usize),
    /// A shared set was given the same pattern of the larger set for these two.
    #[error("patterns {0} and {1} are the same pattern of the larger set")]
    SameInLarger(u32, usize),
}

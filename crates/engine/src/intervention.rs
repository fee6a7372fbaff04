//! What a phase asks the server to do: nothing, or block the transaction.

/// A disruptive outcome that the server must carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intervention {
    /// The HTTP status to answer with (403 by default for `deny`; the rule's `status`).
    pub status: u16,
    /// How to disrupt.
    pub kind: InterventionKind,
    /// The id of the rule that decided, if it had one.
    pub rule_id: Option<i64>,
    /// The message of the deciding rule (its expanded `msg`), for the server's logs.
    pub message: Option<String>,
}

/// The ways a transaction can be disrupted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterventionKind {
    /// Answer with `status` and a short body (`deny`, or `block` under `deny`).
    Deny,
    /// Close the connection without an answer (`drop`).
    Drop,
    /// Answer with a redirect to this URL (`redirect`); `status` is 302 unless set.
    Redirect(String),
}

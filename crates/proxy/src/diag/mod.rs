//! Diagnostics for the bad day: CPU profiles taken on demand ([`profile`],
//! `GET /debug/profile` on the admin listener), the slowest recent requests
//! ([`slow`], `GET /debug/slow`), incidents captured by themselves when a
//! condition holds ([`incident`], `[incidents]`), and the incident bundle of
//! `palisade diag` ([`bundle`]).

pub mod bundle;
pub mod incident;
pub mod profile;
pub mod slow;

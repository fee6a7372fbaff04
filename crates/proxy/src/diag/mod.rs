//! Diagnostics for the bad day: CPU profiles taken on demand ([`profile`],
//! `GET /debug/profile` on the admin listener), the slowest recent requests
//! ([`slow`], `GET /debug/slow`), and the incident bundle of `palisade diag`
//! ([`bundle`]).

pub mod bundle;
pub mod profile;
pub mod slow;

//! Diagnostics for the bad day: CPU profiles taken on demand
//! ([`profile`], `GET /debug/profile` on the admin listener).

pub mod profile;

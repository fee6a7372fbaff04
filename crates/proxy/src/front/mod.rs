//! Front ends: one task per client connection reads requests in its protocol and
//! hands each to the protocol-neutral [`crate::exchange::driver`].

mod connect;
pub mod h1;
pub mod h2;
pub mod h2order;
mod inspect;
pub mod tunnel;

//! Forward proxy building blocks (work in progress).

pub mod auth;
pub mod blockpage;
pub mod clienthello;
pub mod pac;

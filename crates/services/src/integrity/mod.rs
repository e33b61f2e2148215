//! Tool integrity: what the texts of a server's tools may hide from the
//! user and say to a model ([`scan`]), tool definitions pinned on first
//! use, a changed one withheld until accepted ([`pins`]), and the secrets
//! a call's arguments and result carry, masked, refused or counted
//! ([`secrets`]).

pub mod pins;
pub mod scan;
pub mod secrets;

#[cfg(test)]
mod tests;

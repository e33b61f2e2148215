//! Tool integrity: what the texts of a server's tools may hide from the
//! user and say to a model ([`scan`]), and tool definitions pinned on
//! first use, a changed one withheld until accepted ([`pins`]).

pub mod pins;
pub mod scan;

#[cfg(test)]
mod tests;

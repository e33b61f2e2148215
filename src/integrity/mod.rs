//! Tool integrity: what the texts of a server's tools may hide from the
//! user and say to a model ([`scan`]).

pub mod scan;

#[cfg(test)]
mod tests;

//! The checker's rules, one file each with its unit tests; [`super::judge`]
//! runs them all over a history.

pub(crate) mod answers;
pub(crate) mod capacity;
pub(crate) mod claim_runs;
pub(crate) mod claims;
pub(crate) mod data_loss;
pub(crate) mod expiries;
pub(crate) mod frozen;
pub(crate) mod holds;
pub(crate) mod line;
pub(crate) mod overtaken;
pub(crate) mod paths;
pub(crate) mod streams;
pub(crate) mod tickets;
pub(crate) mod tokens;

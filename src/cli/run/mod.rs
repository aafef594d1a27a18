//! `baton run`: its options ([`args`]), the supervisor that takes the lease
//! or claim and runs COMMAND under it ([`supervisor`]), and the pieces it is
//! made of: a claim of several names, the guard process and COMMAND's
//! launch (the two [`halves`]), the holder's streams, a nested run's check,
//! COMMAND's process group and when it is stopped.

pub mod acquired;
pub mod args;
pub mod claim;
pub mod follow;
pub mod group;
pub mod guard;
pub mod halves;
pub mod held;
pub mod launch;
pub mod nested;
pub mod supervisor;
pub mod timing;

//! The halves of `baton run` that are processes of their own (`baton
//! __guard`, `baton __exec`): the words that start them, and their parse.

use std::ffi::OsString;

/// The halves of `baton run` that are processes of their own: not on the
/// command line people use (nor in its help and completions), started by
/// `baton run` alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Internal {
    /// `baton __guard`: the guard of a `baton run` (`guard.rs`).
    Guard,
    /// `baton __exec FD -- COMMAND...`: COMMAND, started once the guard knows
    /// its group (`launch.rs`).
    Exec { fd: i32, command: Vec<OsString> },
}

impl Internal {
    /// The word that starts the guard: `baton __guard`.
    pub const GUARD: &'static str = "__guard";
    /// The word that starts COMMAND: `baton __exec FD -- COMMAND...`.
    pub const EXEC: &'static str = "__exec";

    /// The internal half `args` (the whole command line) starts, if any.
    pub(crate) fn parse(args: &[OsString]) -> Option<Self> {
        let word = |i: usize| args.get(i).and_then(|a| a.to_str());
        match (word(1)?, args.len()) {
            (Self::GUARD, 2) => Some(Self::Guard),
            (Self::EXEC, 5..) if word(3) == Some("--") => Some(Self::Exec {
                fd: word(2)?.parse().ok()?,
                command: args[4..].to_vec(),
            }),
            _ => None,
        }
    }
}

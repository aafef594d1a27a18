//! baton's operations as one Redis Functions library: `lua/line.lua` (the
//! lease core) followed by one function per operation's file, each called
//! with `FCALL` through its one typed wrapper (`lease.rs`, `line.rs`,
//! `progress.rs`), which owns the arguments that follow the six every
//! operation takes ([`invocation`]).
//!
//! A function, unlike a script sent with `EVALSHA`, does not define the lease
//! core's helpers again on every call: the library is compiled once when it
//! is loaded. Its name and its functions' names carry a hash of its code, so
//! two versions of baton on one Redis each call their own. [`Store`] loads it
//! where it is missing (a fresh or restarted Redis, a new cluster node).
//!
//! [`Store`]: super::Store

use std::sync::LazyLock;

use redis::Cmd;

use super::keys::{Keys, Kind};
use crate::domain::Name;

/// One operation of the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Acquire,
    Release,
    Refresh,
    Check,
    Status,
    ForceRelease,
    KeepAlive,
    Place,
}

impl Op {
    const ALL: [Self; 8] = [
        Self::Acquire,
        Self::Release,
        Self::Refresh,
        Self::Check,
        Self::Status,
        Self::ForceRelease,
        Self::KeepAlive,
        Self::Place,
    ];

    /// The operation's name, and its file in `lua/`.
    const fn name(self) -> &'static str {
        match self {
            Self::Acquire => "acquire",
            Self::Release => "release",
            Self::Refresh => "refresh",
            Self::Check => "check",
            Self::Status => "status",
            Self::ForceRelease => "force_release",
            Self::KeepAlive => "keep_alive",
            Self::Place => "place",
        }
    }

    const fn code(self) -> &'static str {
        match self {
            Self::Acquire => include_str!("lua/acquire.lua"),
            Self::Release => include_str!("lua/release.lua"),
            Self::Refresh => include_str!("lua/refresh.lua"),
            Self::Check => include_str!("lua/check.lua"),
            Self::Status => include_str!("lua/status.lua"),
            Self::ForceRelease => include_str!("lua/force_release.lua"),
            Self::KeepAlive => include_str!("lua/keep_alive.lua"),
            Self::Place => include_str!("lua/place.lua"),
        }
    }
}

/// The library's code and the names of its functions.
pub(super) struct Library {
    code: String,
    functions: Vec<String>,
}

impl Library {
    fn new() -> Self {
        let core = include_str!("lua/line.lua");
        let mut all = String::from(core);
        for op in Op::ALL {
            all.push_str(op.code());
        }
        // The first 12 hex digits of the SHA-1 of everything the library runs.
        let hash = redis::Script::new(&all).get_hash().to_owned();
        let version = &hash[..12];
        let functions: Vec<String> = Op::ALL
            .iter()
            .map(|op| format!("baton_{version}_{}", op.name()))
            .collect();
        let mut code = format!("#!lua name=baton_{version}\n{core}\n");
        for (op, function) in Op::ALL.iter().zip(&functions) {
            code.push_str(&format!(
                "redis.register_function('{function}', function(KEYS, ARGV)\nbegin(KEYS, ARGV)\n{}\nend)\n",
                op.code()
            ));
        }
        Self { code, functions }
    }

    /// The code to `FUNCTION LOAD`.
    pub(super) fn code(&self) -> &str {
        &self.code
    }

    /// The name `op` is called by.
    pub(super) fn function(&self, op: Op) -> &str {
        let index = Op::ALL.iter().position(|o| *o == op).unwrap_or(0);
        &self.functions[index]
    }
}

/// The one library of this build.
pub(super) static LIBRARY: LazyLock<Library> = LazyLock::new(Library::new);

/// The library's code, for tools that load it themselves (the benchmark's
/// raw-Redis baseline).
pub fn library_code() -> &'static str {
    LIBRARY.code()
}

/// The name the function of operation `op` ("acquire", "release", ...) is
/// called by, for tests and tools that call one themselves.
pub fn function_name(op: &str) -> Option<&'static str> {
    let op = Op::ALL.into_iter().find(|o| o.name() == op)?;
    Some(LIBRARY.function(op))
}

/// A call of `op` over `name`'s keys with the arguments every operation
/// takes (`lua/line.lua`): the kind, the name, the name's channel and the
/// command that publishes on it, the events channel, and the caller's
/// instance id. Its own arguments follow, with `arg`.
pub(super) fn invocation(
    op: Op,
    keys: &Keys,
    kind: Kind,
    name: &Name,
    publish: &str,
    instance: &str,
) -> Cmd {
    let line = keys.line(kind, name);
    let mut call = redis::cmd("FCALL");
    call.arg(LIBRARY.function(op)).arg(line.len());
    for key in line {
        call.arg(key);
    }
    call.arg(kind.as_str())
        .arg(name.as_str())
        .arg(keys.name_channel(kind, name))
        .arg(publish)
        .arg(keys.events_channel())
        .arg(instance);
    call
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_its_function_named_after_the_library_s_version() {
        let library = Library::new();
        let header = library.code().lines().next().unwrap_or_default();
        let version = header.strip_prefix("#!lua name=baton_").unwrap();
        assert_eq!(version.len(), 12);
        for op in Op::ALL {
            let function = library.function(op);
            assert_eq!(function, format!("baton_{version}_{}", op.name()));
            assert!(library.code().contains(&format!("'{function}'")));
        }
    }
}

//! baton's operations as one Redis Functions library: the lease core's parts
//! (`core/*.lua`, joined in the order of [`CORE`]) followed by one function
//! per operation's file, each called with `FCALL` through its one typed
//! module beside it ([`Function`]): a request type that owns the arguments
//! after the two every operation takes (which the [`Invoker`] adds), and a
//! reply type decoded by a [`Cursor`].
//!
//! A function, unlike a script sent with `EVALSHA`, does not define the lease
//! core's helpers again on every call: the library is compiled once when it
//! is loaded. Its name and its functions' names carry a hash of its code, so
//! two versions of baton on one Redis each call their own. [`Store`] loads it
//! where it is missing (a fresh or restarted Redis, a new cluster node).
//!
//! [`Store`]: crate::engine::connection::Store
//! [`Invoker`]: super::invoker::Invoker

use std::sync::LazyLock;

use redis::{Cmd, Value};

use super::cursor::Cursor;
use super::tail::Tail;
use crate::domain::{Kind, Name};
use crate::engine::error::Error;

/// One operation of the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum Op {
    Acquire,
    Release,
    Refresh,
    Check,
    Status,
    ForceRelease,
    KeepAlive,
    Place,
    Freezes,
    Follow,
    AskYield,
    History,
    Ticket,
    Notice,
}

impl Op {
    const ALL: [Self; 14] = [
        Self::Acquire,
        Self::Release,
        Self::Refresh,
        Self::Check,
        Self::Status,
        Self::ForceRelease,
        Self::KeepAlive,
        Self::Place,
        Self::Freezes,
        Self::Follow,
        Self::AskYield,
        Self::History,
        Self::Ticket,
        Self::Notice,
    ];

    /// The operation's name, and its file in `functions/` (`freezes/` for
    /// the freezes').
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
            Self::Freezes => "freezes",
            Self::Follow => "follow",
            Self::AskYield => "ask_yield",
            Self::History => "history",
            Self::Ticket => "ticket",
            Self::Notice => "notice",
        }
    }

    const fn code(self) -> &'static str {
        match self {
            Self::Acquire => include_str!("acquire.lua"),
            Self::Release => include_str!("release.lua"),
            Self::Refresh => include_str!("refresh.lua"),
            Self::Check => include_str!("check.lua"),
            Self::Status => include_str!("status.lua"),
            Self::ForceRelease => include_str!("force_release.lua"),
            Self::KeepAlive => include_str!("keep_alive.lua"),
            Self::Place => include_str!("place.lua"),
            Self::Freezes => include_str!("../freezes/freezes.lua"),
            Self::Follow => include_str!("follow.lua"),
            Self::AskYield => include_str!("ask_yield.lua"),
            Self::History => include_str!("history.lua"),
            Self::Ticket => include_str!("ticket.lua"),
            Self::Notice => include_str!("notice.lua"),
        }
    }
}

/// The lease core's parts, in the order they are joined: each uses only
/// the parts before it (`core/state.lua` says what each holds). One chunk of
/// Lua in all: at most 200 local variables at its top level, and at most 60
/// upvalues in any one function (Lua 5.1, as Redis runs it).
const CORE: [&str; 10] = [
    include_str!("core/state.lua"),
    include_str!("core/formats.lua"),
    include_str!("core/persist.lua"),
    include_str!("core/history.lua"),
    include_str!("core/messages.lua"),
    include_str!("core/tickets.lua"),
    include_str!("core/pruning.lua"),
    include_str!("core/leases.lua"),
    include_str!("core/admission.lua"),
    include_str!("core/views.lua"),
];

/// The library's code and the names of its functions.
pub(in crate::engine) struct Library {
    code: String,
    functions: Vec<String>,
}

impl Library {
    fn new() -> Self {
        let core = CORE.concat();
        let mut all = core.clone();
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
    pub(in crate::engine) fn code(&self) -> &str {
        &self.code
    }

    /// The name `op` is called by.
    pub(in crate::engine) fn function(&self, op: Op) -> &str {
        let index = Op::ALL.iter().position(|o| *o == op).unwrap_or(0);
        &self.functions[index]
    }
}

/// One function of the library, as Rust calls it: its request owns the
/// arguments after the two every operation takes, its reply is decoded once.
pub(in crate::engine) trait Function {
    const OP: Op;
    type Reply;

    /// Appends this request's own arguments (`ARGV[3..]`, as its `.lua`
    /// header lists them).
    fn args(&self, call: &mut Cmd);

    /// Reads the function's own reply (for a serving function, the part
    /// before the [`Tail`]).
    ///
    /// # Errors
    /// [`Error::Protocol`] when the reply is not what the function answers.
    fn decode(reply: &mut Cursor) -> Result<Self::Reply, Error>;
}

/// A function whose reply ends with `finish()` (`core/messages.lua`): it may serve the
/// line, and so grant leases to waiters.
pub(in crate::engine) trait Serving: Function {}

/// The whole reply of a function that does not serve the line.
///
/// # Errors
/// [`Error::Protocol`] when the reply is not `F`'s, or has fields left over.
pub(in crate::engine) fn decode<F: Function>(value: Value) -> Result<F::Reply, Error> {
    let mut reply = Cursor::new(value)?;
    let decoded = F::decode(&mut reply)?;
    reply.finish()?;
    Ok(decoded)
}

/// A serving function's reply decoded: its own part, and its tail.
pub(in crate::engine) type Served<R> = Result<(R, Tail), Error>;

/// The whole reply of a serving function: its own part, then its tail.
///
/// # Errors
/// [`Error::Protocol`] when the reply is not `F`'s, or has fields left over.
pub(in crate::engine) fn decode_served<F: Serving>(
    value: Value,
) -> Result<(F::Reply, Tail), Error> {
    let mut reply = Cursor::new(value)?;
    let decoded = F::decode(&mut reply)?;
    let tail = Tail::decode(&mut reply)?;
    reply.finish()?;
    Ok((decoded, tail))
}

/// The one library of this build.
pub(in crate::engine) static LIBRARY: LazyLock<Library> = LazyLock::new(Library::new);

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

/// The context every call passes as its second argument (`core/state.lua`):
/// the freeze the instance knows for the name and until when its list is
/// fresh (`start_ms|until_ms|fresh_ms`, `||fresh_ms` for none:
/// `FreezeBook::context_field`; "" holds nothing, for tools), kind, publish command, instance, the name's channel, the
/// history's terms (`MAX|MS`, [`history_terms`]) and the name, one field a
/// line (a name holds no newline: it is printable).
pub fn call_context(
    freeze: &str,
    kind: Kind,
    publish: &str,
    instance: &str,
    channel: &str,
    history: &str,
    name: &Name,
) -> String {
    [
        freeze,
        kind.as_str(),
        publish,
        instance,
        channel,
        history,
        name.as_str(),
    ]
    .join("\n")
}

/// The history's terms as a call's context carries them: at most `max`
/// entries of a name (0: no history), kept `days` past its last lease.
pub fn history_terms(max: u32, days: u32) -> String {
    format!("{max}|{}", u64::from(days) * 86_400_000)
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

    /// The pattern `core/formats.lua` names `READ_{name}`, without its captures.
    fn pattern(name: &str) -> String {
        let line = CORE[1]
            .lines()
            .find(|l| l.starts_with(&format!("local READ_{name} = '")))
            .unwrap_or_else(|| panic!("READ_{name} in core/formats.lua"));
        let quoted = line.split_once(" = '").map_or("", |(_, p)| p);
        quoted.trim_end_matches('\'').replace(['(', ')'], "")
    }

    /// The fast paths read leading fields of a waiter or a solo with
    /// patterns of their own: each must read the same fields as the whole
    /// format's pattern, and a solo is its own fields, then a waiter. The
    /// owner is the last `|`-field of a waiter and a lease, the text fields
    /// after it (`READ_TEXT`).
    #[test]
    fn every_pattern_reads_its_format_from_the_start() {
        let (waiter, solo) = (pattern("WAITER"), pattern("SOLO"));
        let solo_fields = solo
            .strip_suffix(".*$")
            .expect("a solo ends with its waiter");
        assert_eq!(solo_fields, "^%d+|%d+|%d+|%d+|");
        let solo_whole = format!("{solo_fields}{}", &waiter[1..]);
        for view in ["WAITER_ID_NEWEST", "WAITER_TERMS"] {
            assert!(waiter.starts_with(&pattern(view)), "READ_{view}");
        }
        for view in ["SOLO_EXPIRES", "SOLO_HEAD"] {
            assert!(solo_whole.starts_with(&pattern(view)), "READ_{view}");
        }
        for format in ["WAITER", "LEASE"] {
            assert!(
                pattern(format).ends_with("|%d|.*$"),
                "READ_{format}: a priority digit, then the owner and the text"
            );
        }
        assert_eq!(pattern("TEXT"), "^[^\\n]*\\n[^\\n]*\\n.*$");
        // The fast release reads a solo whole, its text as READ_TEXT does.
        let text = pattern("TEXT");
        assert_eq!(
            pattern("SOLO_AS_LEASE"),
            format!("{}{}", solo_whole.trim_end_matches(".*$"), &text[1..])
        );
    }

    /// The Lua files' comments name parts and files that exist: each part of
    /// the core says its place in [`CORE`], and every `x.lua` named (a
    /// function's, or a core part's) is a file here (or the freezes' own, in
    /// `freezes/`), and a function named with its file
    /// (`serve_line(), admission.lua`) is defined in it.
    #[test]
    fn every_lua_header_names_its_part_and_files_that_exist() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine/functions");
        let read = |path: &std::path::Path| std::fs::read_to_string(path).expect("a Lua file");
        let mut files = Vec::new();
        for sub in ["", "core", "../freezes"] {
            for entry in std::fs::read_dir(dir.join(sub)).expect("the Lua files") {
                let path = entry.expect("an entry").path();
                if path.extension().is_some_and(|e| e == "lua") {
                    files.push(path);
                }
            }
        }
        // Where a named file lives: a part of the core, the freezes' own,
        // or a function's here.
        let home = |name: &str| {
            let name = name
                .trim_start_matches("core/")
                .trim_start_matches("freezes/");
            ["core", "../freezes", ""]
                .iter()
                .map(|sub| dir.join(sub).join(name))
                .find(|path| path.exists())
        };
        for (i, part) in CORE.iter().enumerate() {
            let first = part.lines().next().unwrap_or_default();
            assert!(
                first.starts_with(&format!("-- The lease core, part {}:", i + 1)),
                "core part {} says: {first}",
                i + 1
            );
        }
        for path in &files {
            let text = read(path);
            for line in text.lines().filter(|l| l.trim_start().starts_with("--")) {
                for (at, _) in line.match_indices(".lua") {
                    let word = |c: char| c.is_ascii_lowercase() || c == '_' || c == '/';
                    let begin = line[..at].rfind(|c: char| !word(c)).map_or(0, |b| b + 1);
                    let lua = &line[begin..at + 4];
                    if lua == ".lua" || lua.starts_with('/') {
                        continue;
                    }
                    let Some(home) = home(lua) else {
                        panic!("{path:?} names {lua}");
                    };
                    // "serve_line(), admission.lua" or "pack_lease() (formats.lua"
                    let before = line[..begin].trim_end_matches(['(', ' ', ',']);
                    if let Some(call) = before.strip_suffix("()") {
                        let from = call.rfind(|c: char| !word(c)).map_or(0, |b| b + 1);
                        let function = &call[from..];
                        assert!(
                            read(&home).contains(&format!("function {function}(")),
                            "{path:?}: {function}() is not in {lua}"
                        );
                    }
                }
            }
        }
    }
}

//! The Lua scripts, loaded once from their files, each behind the shared lease
//! core `lua/line.lua`. Each is called only through its one typed wrapper
//! (`lease.rs`, `line.rs`, `progress.rs`), which owns the ARGV that follow
//! the six every script takes ([`invocation`]); `redis::Script` sends EVALSHA
//! and loads the script on NOSCRIPT.

use std::sync::LazyLock;

use redis::{Script, ScriptInvocation};

use super::keys::{Keys, Kind};
use crate::domain::Name;

/// A call of `script` over `name`'s keys with the arguments every script
/// takes (`lua/line.lua`): the kind, the name, the name's channel and the
/// command that publishes on it, the events channel, and the caller's
/// instance id.
pub(super) fn invocation<'a>(
    script: &'a Script,
    keys: &Keys,
    kind: Kind,
    name: &Name,
    publish: &str,
    instance: &str,
) -> ScriptInvocation<'a> {
    let mut call = script.prepare_invoke();
    for key in keys.line(kind, name) {
        call.key(key);
    }
    call.arg(kind.as_str())
        .arg(name.as_str())
        .arg(keys.name_channel(kind, name))
        .arg(publish)
        .arg(keys.events_channel())
        .arg(instance);
    call
}

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("lua/line.lua"),
                include_str!(concat!("lua/", $file))
            ))
        });
    };
}

script!(ACQUIRE, "acquire.lua");
script!(RELEASE, "release.lua");
script!(REFRESH, "refresh.lua");
script!(CHECK, "check.lua");
script!(STATUS, "status.lua");
script!(FORCE_RELEASE, "force_release.lua");
script!(KEEP_ALIVE, "keep_alive.lua");
script!(PLACE, "place.lua");

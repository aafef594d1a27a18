//! The Lua scripts, loaded once from their files, each behind the shared lease
//! core `lua/line.lua`. Each is called only through its one typed wrapper in
//! `lease.rs`, which owns its KEYS/ARGV order; `redis::Script` sends EVALSHA
//! and loads the script on NOSCRIPT.

use std::sync::LazyLock;

use redis::Script;

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

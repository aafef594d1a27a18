//! The Lua scripts, loaded once from their files. Each is called only through
//! the one typed wrapper in `lock.rs` or `semaphore.rs` that owns its KEYS/ARGV
//! order; `redis::Script` sends EVALSHA and loads the script on NOSCRIPT.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("lua/", $file))));
    };
}

script!(LOCK_ACQUIRE, "lock_acquire.lua");
script!(LOCK_RELEASE, "lock_release.lua");
script!(LOCK_REFRESH, "lock_refresh.lua");
script!(LOCK_GET, "lock_get.lua");
script!(LOCK_STATUS, "lock_status.lua");
script!(LOCK_FORCE_RELEASE, "lock_force_release.lua");
script!(SEM_ACQUIRE, "sem_acquire.lua");
script!(SEM_RELEASE, "sem_release.lua");
script!(SEM_REFRESH, "sem_refresh.lua");
script!(SEM_GET, "sem_get.lua");
script!(SEM_STATUS, "sem_status.lua");

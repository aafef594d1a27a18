//! baton's Redis Functions library, one function a pair of files: its Lua
//! (`NAME.lua`, whose header lists its `ARGV` and replies) and its typed Rust
//! side (`NAME.rs`: a request that owns its arguments, a reply decoded by a
//! [`cursor::Cursor`] that rejects what is left over); the freezes' pair
//! (`freezes.lua`, `function.rs`) lives in their own room, `freezes/`, and
//! is joined here like the others. `core/` is the lease
//! core every function shares, in parts by concern that [`library`] joins
//! (`core/state.lua` lists them); [`invoker`] makes every call, with what
//! every call passes; [`tail`] decodes what every serving function's reply
//! ends with (its messages about waiters by `channel/message.rs`), and
//! [`waiter`] is how the line keeps a waiter. Nothing outside `engine/` sees the wire format.

pub(super) mod acquire;
pub(super) mod ask_yield;
pub(super) mod check;
pub(super) mod cursor;
pub(super) mod follow;
pub(super) mod force_release;
pub(super) mod history;
pub(super) mod invoker;
pub(super) mod keep_alive;
pub(super) mod library;
pub(super) mod notice;
pub(super) mod place;
pub(super) mod refresh;
pub(super) mod release;
pub(super) mod status;
pub(super) mod tail;
pub(super) mod ticket;
pub(super) mod waiter;

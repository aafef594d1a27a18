//! This instance as the caller of the library (the invoker): every call of
//! a function is made here, with what every call passes besides its own
//! arguments (the name's owners hash, the events channel while anyone
//! listens, the call's context, with the freeze this instance knows for the
//! name) and its reply read by the function's own decoder.

use std::sync::Arc;

use redis::Cmd;

#[cfg(doc)]
use super::library::history_terms;
use super::library::{call_context, decode, decode_served, Function, Served, Serving, LIBRARY};
use crate::domain::{Kind, Name};
use crate::engine::connection::Store;
use crate::engine::error::Error;
use crate::engine::events::Audience;
use crate::engine::keys::Keys;

/// What a call carries of the freezes: the freeze field of its context
/// (`core/state.lua`), from this instance's list of them (the freezes'
/// book, `freezes/book.rs`, which lives above the library).
pub(in crate::engine) trait FreezeField: Send + Sync {
    /// The freeze field of a call on the `kind` named `name` made now.
    fn context_field(&self, kind: Kind, name: &str) -> String;
}

/// Who calls the library and how: the connection, the key layout, this
/// instance's id in Redis's lines, and whether anyone listens to change
/// events.
pub(in crate::engine) struct Invoker {
    store: Store,
    keys: Keys,
    /// This process's id in Redis's lines; waiters of a dead instance leave.
    instance: String,
    /// Whether calls publish change events (`ARGV[1]`).
    audience: Arc<Audience>,
    /// The freezes, as this instance holds them: a call that may grant
    /// carries the name's (in its context).
    freezes: Arc<dyn FreezeField>,
    /// The history's terms every call carries in its context.
    history: String,
}

impl Invoker {
    /// An invoker with a new instance id for this instance; `history` is
    /// [`history_terms`] of the settings.
    pub(in crate::engine) fn new(
        store: Store,
        keys: Keys,
        audience: Arc<Audience>,
        history: String,
        freezes: Arc<dyn FreezeField>,
    ) -> Self {
        Self {
            store,
            keys,
            instance: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned(),
            audience,
            history,
            freezes,
        }
    }

    pub(in crate::engine) fn store(&self) -> &Store {
        &self.store
    }

    pub(in crate::engine) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// This instance's id in Redis's lines.
    pub(in crate::engine) fn instance(&self) -> &str {
        &self.instance
    }

    /// The `FCALL` of `function` over `name`'s owners hash (the key every
    /// call declares; `core/state.lua` names the others from it) with the
    /// two arguments every operation takes: the events channel ("" while
    /// nobody listens there, so the call publishes no event), and the call's
    /// [`call_context`]; then the function's own.
    pub(in crate::engine) fn call<F: Function>(
        &self,
        kind: Kind,
        name: &Name,
        function: &F,
    ) -> Cmd {
        let keys = &self.keys;
        let mut call = redis::cmd("FCALL");
        call.arg(LIBRARY.function(F::OP))
            .arg(1)
            .arg(keys.owners(kind, name))
            .arg(if self.audience.listening() {
                keys.events_channel()
            } else {
                ""
            })
            // Every call that may grant (an acquire, and any call that serves
            // the line: release, refresh, keep-alive, ...) is built here, so
            // this is where a stale list is kept from granting: while the
            // list was never loaded or was last found to be Redis's more than
            // FRESH_FOR ago (this instance was stopped, Redis was out of
            // reach), the call carries HOLD_ALL and grants nothing but an
            // override. Staleness is judged by age, not by a version the
            // function reads, because the list lives in its own slot and a
            // name's function on Redis Cluster may touch only its name's
            // slot; age works on every topology and costs no command here
            // (the list's version is checked by `freezes::follow` when a
            // call that serves the line finds the list getting old,
            // `FreezeBook::ready`: at most about twice a second per instance
            // under traffic, never while it is quiet, not per request).
            .arg(call_context(
                &self.freezes.context_field(kind, name.as_str()),
                kind,
                self.store.shard_publish_command(),
                &self.instance,
                &keys.name_channel(kind, name),
                &self.history,
                name,
            ));
        function.args(&mut call);
        call
    }

    /// Runs a function that is no name's (the list of freezes) on its one
    /// key, with the two arguments every call takes empty.
    ///
    /// # Errors
    /// Redis unavailable, or a reply that is not the function's.
    pub(in crate::engine) async fn run_on<F: Function>(
        &self,
        key: &str,
        function: &F,
    ) -> Result<F::Reply, Error> {
        let mut call = redis::cmd("FCALL");
        call.arg(LIBRARY.function(F::OP))
            .arg(1)
            .arg(key)
            .arg("")
            .arg("");
        function.args(&mut call);
        decode::<F>(self.store.fcall(&call).await?)
    }

    /// Runs a function that does not serve the line.
    ///
    /// # Errors
    /// Redis unavailable, or a reply that is not the function's.
    pub(in crate::engine) async fn run<F: Function>(
        &self,
        kind: Kind,
        name: &Name,
        function: &F,
    ) -> Result<F::Reply, Error> {
        decode::<F>(self.store.fcall(&self.call(kind, name, function)).await?)
    }

    /// Runs `call`, made by [`Self::call`] of a function that serves the
    /// line: its own reply, and what it ends with.
    ///
    /// # Errors
    /// Redis unavailable (the call may have run), or a reply that is not the
    /// function's.
    pub(in crate::engine) async fn run_serving<F: Serving>(&self, call: &Cmd) -> Served<F::Reply> {
        self.store.fcall(call).await.and_then(decode_served::<F>)
    }
}

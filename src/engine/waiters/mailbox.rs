//! What a waiter hears while it waits, and the mailbox that keeps it until
//! the waiter reads it.

use std::sync::Mutex;

use tokio::sync::Notify;

use crate::domain::Owner;

/// What a waiter hears while it waits.
#[derive(Debug)]
pub(crate) enum WaiterNotice {
    /// The line granted it a lease: held until `expires_at_ms` when `held`,
    /// else provisional, to be confirmed before it is answered.
    Granted {
        token: u64,
        expires_at_ms: u64,
        held: bool,
    },
    /// A newer `newest_wins` request took its place.
    Superseded { owner: Option<Owner> },
    /// Messages may have been missed: ask Redis again.
    Recheck,
    /// The service is shutting down: stop waiting.
    ShuttingDown,
}

/// A waiter's notices: the one that ends its wait (a grant or superseding),
/// and whether it should ask Redis again. A few dozen bytes, where a channel
/// would allocate room for 32 notices for every waiter.
#[derive(Default)]
pub(super) struct Mailbox {
    mail: Mutex<Mail>,
    ready: Notify,
}

#[derive(Default)]
struct Mail {
    last: Option<WaiterNotice>,
    recheck: bool,
}

impl Mailbox {
    pub(super) fn post(&self, notice: WaiterNotice) {
        {
            // One assignment under the lock: poisoning cannot leave it half done.
            let mut mail = self.mail.lock().unwrap_or_else(|e| e.into_inner());
            match notice {
                WaiterNotice::Recheck => mail.recheck = true,
                // The first that ends the wait stays.
                ending => {
                    mail.last.get_or_insert(ending);
                }
            }
        }
        self.ready.notify_one();
    }

    pub(super) async fn next(&self) -> WaiterNotice {
        loop {
            {
                let mut mail = self.mail.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(notice) = mail.last.take() {
                    return notice;
                }
                if std::mem::take(&mut mail.recheck) {
                    return WaiterNotice::Recheck;
                }
            }
            // A post between the check and here leaves a permit: not missed.
            self.ready.notified().await;
        }
    }
}

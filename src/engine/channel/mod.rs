//! A name's channel, as this instance hears it: one subscription per name
//! channel however many listen (`hub.rs`), and one decoder for every
//! message the library writes there or in a serving function's reply
//! (`message.rs`). The waiters and the holders' streams are its two
//! listeners.

mod hub;
mod message;

pub(in crate::engine) use hub::{Listener, NameChannels, Subscription};
pub(in crate::engine) use message::{HolderMessage, LineMessage, NameMessage};

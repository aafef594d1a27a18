//! Progress of a waiting acquisition: the query of its place in line.

use crate::domain::{Kind, Name};
use crate::engine::error::Error;
use crate::engine::functions::place::Find;
use crate::engine::handle::Engine;
use crate::engine::model::Place;

/// A waiter's place in one name's line, to ask about ([`Engine::place`]);
/// what it holds is the engine's business.
#[derive(Debug, Clone)]
pub struct InLine {
    pub(super) kind: Kind,
    pub(super) name: Name,
    /// The waiter as the line keeps it.
    pub(super) waiter: String,
}

impl Engine {
    /// Where the waiter `in_line` stands; `None` when it is not in line
    /// (granted meanwhile, or gone).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis does not answer.
    pub async fn place(&self, in_line: &InLine) -> Result<Option<Place>, Error> {
        let find = Find(&in_line.waiter);
        self.invoker().run(in_line.kind, &in_line.name, &find).await
    }
}

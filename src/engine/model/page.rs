//! One page of anything the core answers a page at a time (the listings,
//! a name's history): its entries, where the next starts, and how many one
//! may hold.

use crate::domain::Invalid;

/// One page: its entries, in the order of what it pages through, and where
/// the next page starts (a cursor of type `C`) while more remain.
#[derive(Debug, Clone)]
pub struct Page<T, C> {
    pub entries: Vec<T>,
    /// Where the next page starts; `None` when this was the last.
    pub next_cursor: Option<C>,
}

/// How many entries one page may hold: 1 to `MAX`, `DEFAULT` when the
/// request does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSize<const MAX: usize, const DEFAULT: usize>(usize);

impl<const MAX: usize, const DEFAULT: usize> PageSize<MAX, DEFAULT> {
    pub const MAX: usize = MAX;
    pub const DEFAULT: usize = DEFAULT;

    /// # Errors
    /// When `n` is 0 or over `MAX`.
    pub fn new(n: u64) -> Result<Self, Invalid> {
        match usize::try_from(n) {
            Ok(n) if (1..=MAX).contains(&n) => Ok(Self(n)),
            _ => Err(Invalid(format!("must be between 1 and {MAX}"))),
        }
    }

    pub fn get(self) -> usize {
        self.0
    }
}

impl<const MAX: usize, const DEFAULT: usize> Default for PageSize<MAX, DEFAULT> {
    fn default() -> Self {
        Self(DEFAULT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_one_to_max_entries_and_default_unless_told() {
        type Size = PageSize<100, 20>;
        assert_eq!(Size::default().get(), 20);
        assert_eq!(Size::new(1).map(Size::get), Ok(1));
        assert_eq!(Size::new(100).map(Size::get), Ok(100));
        for n in [0, 101, u64::MAX] {
            assert_eq!(
                Size::new(n).map_err(|e| e.0),
                Err("must be between 1 and 100".to_owned()),
                "{n}"
            );
        }
    }
}

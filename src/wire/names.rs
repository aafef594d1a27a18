//! [`names!`]: a closed set of names on the wire (the events of one stream,
//! the reasons a lease was lost) as an enum whose variants each stand for
//! one name, written once, with `as_str`, `from_name` and `ALL`.

/// `names! { /// What they are. Type { Variant => "name", ... } }`: the
/// enum, each variant standing for its name.
macro_rules! names {
    ($(#[$meta:meta])* $ty:ident { $($(#[$vmeta:meta])* $variant:ident => $name:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $ty {
            $($(#[$vmeta])* $variant,)+
        }

        impl $ty {
            /// Every name of the set.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)+];

            /// Its name on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }

            /// The one named `name`, when this version knows it.
            pub fn from_name(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|known| known.as_str() == name)
            }
        }
    };
}

pub(crate) use names;

//! `baton completions SHELL` (clap_complete) and `baton man [SUBCOMMAND]`
//! (clap_mangen), both made from the command line's own declarations.

use std::io::Write;

use super::args::command;
use super::exit::{Failure, USAGE};

/// Prints the completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) {
    clap_complete::generate(shell, &mut command(), "baton", &mut std::io::stdout());
}

/// Prints the manual page of baton, or of one of its subcommands.
///
/// # Errors
/// An unknown subcommand (64), or stdout closed.
pub fn man(subcommand: Option<&str>) -> Result<(), Failure> {
    let mut full = command();
    full.build();
    let page = match subcommand {
        None => full,
        Some(name) => {
            let found = full
                .find_subcommand(name)
                .cloned()
                .ok_or_else(|| Failure::usage(format!("no subcommand {name}: see baton --help")))?;
            found.name(format!("baton-{name}"))
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .and_then(|()| std::io::stdout().write_all(&out))
        .map_err(|err| Failure::new(USAGE, format!("cannot write the page: {err}")))
}

//! `baton list`: the held locks (with `--limit`, the semaphores with
//! holders), every page of them.

use clap::Args;
use reqwest::Method;
use serde_json::Value;

use crate::cli::answer::{failure, unreadable};
use crate::cli::cmd::status::describe_status;
use crate::cli::exit::Failure;
use crate::cli::http::{call, json, Service};
use crate::cli::messages::show;
use crate::cli::options::{Connection, KindOption, Output};
use crate::cli::target::Target;
use crate::domain::Kind;
use crate::wire::{Listing, StatusBody};

/// `baton list`
#[derive(Args, Debug, Clone)]
pub struct ListArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// Only names that start with this
    #[arg(long, default_value = "")]
    pub prefix: String,

    /// How to print the list
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
}

/// `baton list`: every page.
///
/// # Errors
/// The call failed.
pub async fn list(args: ListArgs) -> Result<(), Failure> {
    let kind = args.kind.kind().unwrap_or(Kind::Lock);
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let encode = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    // As the service wrote them: `--output json` prints them so.
    let mut entries: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!(
            "/{}?limit=1000&prefix={}",
            kind.plural(),
            encode(&args.prefix)
        );
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={}", encode(cursor)));
        }
        let answer = call(&service, Method::GET, &path, None).await?;
        if answer.status != 200 {
            let target = Target::new(kind, "list").expect("a valid name");
            return Err(failure(&answer, &target));
        }
        let page =
            Listing::from_json(kind, &answer.body).map_err(|err| unreadable("listing", &err))?;
        entries.extend(page.entries);
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let all = Listing {
        kind,
        entries,
        next_cursor: None,
    };
    match args.output {
        Output::Json => show(format!("{}\n", json(&all))),
        Output::Text => {
            let mut text = String::new();
            for entry in &all.entries {
                let status = StatusBody::from_json(kind, entry)
                    .map_err(|err| unreadable("listing", &err))?;
                text.push_str(&describe_status(&status, false));
            }
            show(text)
        }
    }
}

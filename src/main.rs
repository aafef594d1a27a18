//! The `baton` binary: command line -> a client subcommand (`baton::cli`), or
//! settings and tokens -> telemetry -> Application::build_with -> serve until
//! SIGINT or SIGTERM.

use std::io::Write;
use std::process::ExitCode;

use baton::access::Tokens;
use baton::cli::Parsed;
use baton::config::Settings;
use baton::startup::Application;

fn main() -> ExitCode {
    let settings = match baton::cli::parse(std::env::args_os().collect()) {
        Parsed::Serve(settings) => *settings,
        Parsed::Client(command) => return baton::cli::main(command),
        Parsed::Internal(half) => return baton::cli::internal(half),
        Parsed::Print(text) => return baton::cli::print_help(&text),
        Parsed::Usage(err) => {
            let _ = err.print();
            return ExitCode::from(64);
        }
        Parsed::BadSetting(line) => {
            // One line, before any logging: nothing is served.
            let _ = writeln!(std::io::stderr(), "baton: bad setting: {line}");
            return ExitCode::from(2);
        }
    };
    // The token file is a setting too: read before anything is logged.
    let tokens = match Tokens::load(&settings) {
        Ok(tokens) => tokens,
        Err(line) => {
            eprintln!("baton: bad setting: {line}");
            return ExitCode::from(2);
        }
    };
    baton::telemetry::init_logging(settings.log_format);
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .collect();
    for (unknown, closest) in baton::config::unknown_variables(names.iter().map(String::as_str)) {
        tracing::warn!(
            variable = %unknown,
            "unknown variable {unknown} is ignored; did you mean {closest}?"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.worker_threads)
        .enable_all()
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(serve(settings, tokens)),
        Err(err) => {
            tracing::error!("cannot start the async runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(settings: Settings, tokens: Tokens) -> ExitCode {
    let app = match Application::build_with(settings, tokens).await {
        Ok(app) => app,
        Err(err) => {
            tracing::error!("cannot start: {err}");
            return ExitCode::FAILURE;
        }
    };
    match app.run_until(baton::shutdown::signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("serving failed: {err}");
            ExitCode::FAILURE
        }
    }
}

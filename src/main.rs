//! The `baton` binary: settings -> telemetry -> Application::build -> run until
//! SIGINT or SIGTERM.

use std::process::ExitCode;

use baton::config::Settings;
use baton::startup::Application;

fn main() -> ExitCode {
    baton::telemetry::init_logging();
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(err) => {
            tracing::error!("bad configuration: {err}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.worker_threads)
        .enable_all()
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(serve(settings)),
        Err(err) => {
            tracing::error!("cannot start the async runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(settings: Settings) -> ExitCode {
    let app = match Application::build(settings).await {
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

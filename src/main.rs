//! The `baton` binary: command line and settings -> telemetry ->
//! Application::build -> run until SIGINT or SIGTERM; or `baton healthcheck`.

use std::process::ExitCode;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use baton::config::{Cli, Command, Invocation, Settings};
use baton::startup::Application;

fn main() -> ExitCode {
    let (command, settings) = match Cli::from_args(std::env::args_os()) {
        Ok(Invocation::Run(command, settings)) => (command, *settings),
        Ok(Invocation::Print(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            // One line, before any logging: nothing is served.
            eprintln!("baton: bad setting: {err}");
            return ExitCode::from(2);
        }
    };
    if command == Some(Command::Healthcheck) {
        return healthcheck(&settings);
    }
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

/// Exit 0 when the service at `BATON_LISTEN` answers `/healthz` with 200.
fn healthcheck(settings: &Settings) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let healthy = runtime.is_ok_and(|runtime| {
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(3), answers_healthz(&settings.listen))
                .await
                .is_ok_and(|answer| answer.unwrap_or(false))
        })
    });
    if healthy {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "baton: {} does not answer /healthz with 200",
            settings.listen
        );
        ExitCode::FAILURE
    }
}

/// One HTTP/1.1 `GET /healthz` to `listen` (a wildcard address is asked on
/// loopback); whether the status line says 200.
async fn answers_healthz(listen: &str) -> std::io::Result<bool> {
    let (host, port) = listen.rsplit_once(':').unwrap_or((listen, "8080"));
    let host = match host {
        "0.0.0.0" | "" => "127.0.0.1",
        "[::]" => "[::1]",
        other => other,
    };
    let mut stream = tokio::net::TcpStream::connect(format!("{host}:{port}")).await?;
    let request =
        format!("GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    stream.take(64).read_to_end(&mut head).await?;
    let status_line = String::from_utf8_lossy(&head);
    Ok(status_line.starts_with("HTTP/1.1 200 ") || status_line.starts_with("HTTP/1.0 200 "))
}

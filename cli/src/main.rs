//! The `skiff` binary: command-line parsing, configuration and wiring of the
//! components into one process. It owns process supervision and start-up
//! reporting; it must never hold cluster logic of its own.

mod agent;
mod images;
mod server;

use clap::{Parser, Subcommand};

/// skiff: a Kubernetes distribution in one binary.
#[derive(Debug, Parser)]
#[command(name = "skiff", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a cluster: API server, controllers, scheduler and node agent.
    Server(server::ServerArgs),
    /// Run only the node agent, joining a skiff server.
    Agent(agent::AgentArgs),
    /// Import and list container images of a running node.
    Images(images::ImagesArgs),
    /// Print the skiff version.
    Version,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SKIFF_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Server(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(server::run(args)),
        Command::Agent(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(agent::run(args)),
        Command::Images(args) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(images::run(args)),
        Command::Version => {
            println!("skiff {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
    }
}

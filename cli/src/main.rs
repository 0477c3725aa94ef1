//! The `skiff` binary: command-line parsing, configuration and wiring of the
//! components into one process. It owns process supervision and start-up
//! reporting; it must never hold cluster logic of its own.

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
    /// Print the skiff version and the Kubernetes version it serves.
    Version,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("skiff {}", env!("CARGO_PKG_VERSION"));
        }
    }
    Ok(())
}

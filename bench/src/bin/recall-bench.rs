//! `recall-bench`: the research runner. `recall-bench --help` lists the
//! commands; bench/README.md says what each measures.

use clap::Parser;

/// The allocator of the `recall` binary, so the bench times what the CLI runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    recall_bench::commands::dispatch(recall_bench::commands::Cli::parse()).await
}

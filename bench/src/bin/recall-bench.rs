//! `recall-bench`: the research runner. `recall-bench --help` lists the
//! commands; bench/README.md says what each measures.

use clap::Parser;

/// The allocator of the `recall` binary, set up as it does, so the bench
/// times what the CLI runs.
#[global_allocator]
static ALLOCATOR: recall::allocator::MiMalloc = recall::allocator::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    recall::allocator::keep_freed_pages();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // LanceDB's scanner warns on every query of `peers` that it
                // will stop returning `_distance` unasked; `peers` reads only
                // the ids, so that warning says nothing to its user.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("warn,lance::dataset::scanner=error")
                }),
        )
        .with_writer(std::io::stderr)
        .init();
    recall_bench::commands::dispatch(recall_bench::commands::Cli::parse()).await
}

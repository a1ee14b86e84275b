//! `recall import`: a JSONL file into a tenant, in durable calls that can be
//! resumed after a failure.

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::Context;
use recall::{Engine, Remembered};

use crate::print::print_json;

/// Where an import reads from: the file, lines already imported, and
/// memories per durable call.
pub(crate) struct ImportSource<'a> {
    pub(crate) file: &'a PathBuf,
    pub(crate) skip: usize,
    pub(crate) batch: usize,
}

/// Imports a JSONL file. A line that does not parse stops the import before
/// anything is written. A call that fails stops it after the calls before
/// it, which are durable: the error names how many of the file's first
/// lines are written (`acknowledged_lines`, also printed as JSON on stdout
/// with `--json`), so `--skip` that many resumes exactly.
pub(crate) async fn import(
    engine: &Engine,
    tenant: &str,
    source: ImportSource<'_>,
    json: bool,
) -> anyhow::Result<()> {
    let ImportSource { file, skip, batch } = source;
    let reader = std::io::BufReader::new(
        std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?,
    );
    // The file's line number (1-based) of each memory, beside it.
    let mut line_of = Vec::new();
    let mut memories = Vec::new();
    for (n, line) in reader.lines().enumerate().skip(skip) {
        let line = line.with_context(|| format!("reading {}", file.display()))?;
        let Some(memory) = recall::parse_import_line(tenant, &line)
            .with_context(|| format!("line {}; nothing was imported", n + 1))?
        else {
            continue;
        };
        line_of.push(n + 1);
        memories.push(memory);
    }
    let bar = indicatif::ProgressBar::new(memories.len() as u64);
    if json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let (mut stored, mut proposed, mut deduplicated) = (0usize, 0usize, 0usize);
    let total = memories.len();
    let outcome = engine
        .import(memories, batch, |outcomes| {
            for outcome in outcomes {
                match outcome {
                    Remembered::Stored { .. } => stored += 1,
                    Remembered::Proposed { .. } => proposed += 1,
                    Remembered::Deduplicated { .. } => deduplicated += 1,
                }
            }
            bar.inc(outcomes.len() as u64);
        })
        .await;
    bar.finish_and_clear();
    let written = stored + proposed + deduplicated;
    // Every line up to the last written memory's is done (blank lines
    // included); with none written, only the skipped ones.
    let acknowledged_lines = written
        .checked_sub(1)
        .and_then(|last| line_of.get(last).copied())
        .unwrap_or(skip);
    if json {
        let mut report = serde_json::json!({
            "read": total,
            "stored": stored,
            "proposed": proposed,
            "deduplicated": deduplicated,
            "acknowledged_lines": acknowledged_lines,
        });
        if let Err(e) = &outcome {
            report["error"] = serde_json::Value::String(format!("{e:#}"));
        }
        print_json(&report)?;
    }
    if let Err(e) = outcome {
        let failed_from = line_of
            .get(written)
            .copied()
            .unwrap_or(acknowledged_lines + 1);
        return Err(anyhow::Error::new(e).context(format!(
            "import stopped at the call starting at line {failed_from} of {}: \
             the first {acknowledged_lines} lines are imported ({stored} stored, \
             {proposed} proposed, {deduplicated} deduplicated); re-run with --skip \
             {acknowledged_lines} to go on",
            file.display()
        )));
    }
    if !json {
        println!(
            "imported {total} lines: {stored} stored, {proposed} proposed, {deduplicated} deduplicated"
        );
    }
    Ok(())
}

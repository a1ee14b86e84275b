//! How the CLI prints memories, proposals and recalls for people (`--json`
//! prints them as JSON instead).

use recall::{Memory, RecallResult};
use uuid::Uuid;

pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

pub(crate) fn print_memory(m: &Memory) {
    let title = m
        .title
        .as_deref()
        .map(|t| format!(" «{t}»"))
        .unwrap_or_default();
    let status = if m.forgotten {
        " (forgotten)"
    } else if m.superseded_by.is_some() {
        " (superseded)"
    } else {
        match m.proposal.as_ref().map(|p| (p.held, &p.status)) {
            Some((true, recall::ProposalStatus::Pending)) => " (proposed)",
            Some((true, recall::ProposalStatus::Rejected { .. })) => " (rejected)",
            _ => "",
        }
    };
    println!(
        "{} [{}] {}{}{}: {}",
        m.id, m.kind, m.bank, title, status, m.content
    );
}

pub(crate) fn print_proposal(p: &recall::PendingProposal) {
    print!("  ");
    print_memory(&p.memory);
    if let Some(against) = &p.against {
        let replaces = p
            .memory
            .proposal
            .as_ref()
            .is_some_and(|x| !x.supersedes.is_empty());
        let verb = if replaces { "supersedes" } else { "near" };
        println!(
            "    {verb} {}{}",
            against.id,
            p.cosine
                .map(|c| format!(" (cosine {c:.3})"))
                .unwrap_or_default()
        );
    }
    if let Some(diff) = &p.diff {
        println!("    diff: {diff}");
    }
    if !p.rivals.is_empty() {
        let ids: Vec<String> = p.rivals.iter().map(Uuid::to_string).collect();
        println!(
            "    a fork: {} would replace the same memory",
            ids.join(", ")
        );
    }
}

pub(crate) fn print_recall(result: &RecallResult) {
    if result.abstained {
        if result.unknown_names.is_empty() {
            println!(
                "(abstained: nothing relevant enough among {} candidates)",
                result.candidates
            );
        } else {
            println!(
                "(abstained: no memory mentions {})",
                result.unknown_names.join(" or ")
            );
        }
        return;
    }
    for (rank, hit) in result.hits.iter().enumerate() {
        let m = &hit.memory;
        let title = m
            .title
            .as_deref()
            .map(|t| format!(" «{t}»"))
            .unwrap_or_default();
        println!("{:>2}. [{}]{} {}", rank + 1, m.kind, title, m.content);
        println!("    {}", hit.breakdown.explain().replace('\n', "\n    "));
    }
}

pub(crate) fn recall_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| ms.to_string())
}

pub(crate) fn show(json: bool, m: &Memory) -> anyhow::Result<()> {
    if json {
        print_json(m)
    } else {
        print_memory(m);
        Ok(())
    }
}

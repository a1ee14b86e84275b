//! The `recall` binary itself, as a user runs it: exit codes, what it prints,
//! and an import that fails part way telling exactly what is written (and
//! `--skip` resuming from there). Uses the real model, like the other
//! integration tests.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `recall --data DIR ARGS...`.
fn recall(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recall"))
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The JSON object a `--json` command printed on stdout.
fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stdout)))
}

/// An import line a person wrote (the `org` bank holds an agent's writes for review).
fn line(content: &str) -> String {
    serde_json::json!({"bank": "org", "kind": "note", "content": content, "trust": "user"})
        .to_string()
}

#[test]
fn remember_recall_and_status_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let out = recall(
        data,
        &[
            "remember",
            "--tenant",
            "acme",
            "--bank",
            "org",
            "--kind",
            "pitfall",
            "--title",
            "Friday deploys",
            "--trust",
            "user",
            "Never deploy the billing service on a Friday afternoon.",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("stored "),
        "{}",
        text(&out.stdout)
    );

    let out = recall(
        data,
        &[
            "--json",
            "recall",
            "--tenant",
            "acme",
            "--read",
            "org",
            "can I deploy billing on Friday?",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result = json(&out);
    let hits = result["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{result}");
    assert_eq!(hits[0]["memory"]["title"], "Friday deploys");

    // Another tenant sees nothing of it.
    let out = recall(
        data,
        &[
            "--json",
            "recall",
            "--tenant",
            "globex",
            "--read",
            "org",
            "Friday deploys",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(json(&out)["hits"].as_array().unwrap().len(), 0);

    // Bad input: a clear error, a non-zero exit, nothing written.
    let out = recall(
        data,
        &[
            "remember", "--tenant", "../etc", "--bank", "org", "--kind", "note", "x",
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("tenant"),
        "{}",
        text(&out.stderr)
    );
    let out = recall(
        data,
        &[
            "remember", "--tenant", "acme", "--bank", "org", "--kind", "rumour", "x",
        ],
    );
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("kind"), "{}", text(&out.stderr));

    let out = recall(data, &["--json", "status"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status = json(&out);
    assert_eq!(
        (status["tenants"].as_u64(), status["memories"].as_u64()),
        (Some(1), Some(1)),
        "{status}"
    );

    // A consolidation pass over one memory: nothing to propose, and a
    // second pass looks at nothing (its cursor was stored).
    let out = recall(
        data,
        &["--json", "consolidate", "--tenant", "acme", "--dry-run"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pass = json(&out);
    assert_eq!(
        (pass["dry_run"].as_bool(), pass["looked_at"].as_u64()),
        (Some(true), Some(1)),
        "{pass}"
    );
    assert_eq!(
        pass["proposals"].as_array().map(Vec::len),
        Some(0),
        "{pass}"
    );
    for looked_at in [1, 0] {
        let out = recall(
            data,
            &["--json", "consolidate", "--tenant", "acme", "--budget", "5"],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(json(&out)["looked_at"].as_u64(), Some(looked_at));
    }
}

/// An agent's write into `org` is a proposal: listed by `recall
/// proposals`, not recalled until `recall accept`; `--bank-mode` makes the
/// bank direct.
#[test]
fn a_proposal_is_listed_accepted_and_then_recalled() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let remember = |extra: &[&str], content: &str| {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        args.extend([
            "remember", "--tenant", "acme", "--bank", "org", "--kind", "pitfall", content,
        ]);
        let out = recall(data, &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        json(&out)
    };
    let hits = |query: &str| {
        let out = recall(
            data,
            &[
                "--json", "recall", "--tenant", "acme", "--read", "org", query,
            ],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        json(&out)["hits"].as_array().unwrap().len()
    };
    let proposed = remember(&[], "The billing cron breaks on leap days.");
    assert_eq!(proposed["outcome"], "proposed", "{proposed}");
    let id = proposed["id"].as_str().unwrap().to_string();
    assert_eq!(hits("leap day billing"), 0);

    let out = recall(data, &["--json", "proposals", "--tenant", "acme"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pending = json(&out);
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending}");
    assert_eq!(pending[0]["memory"]["id"], id.as_str());

    let out = recall(
        data,
        &[
            "--json", "accept", "--tenant", "acme", &id, "--actor", "ann",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(json(&out)["proposal"]["status"], "accepted");
    assert_eq!(hits("leap day billing"), 1);
    // Accepting twice is a clear error.
    let out = recall(data, &["accept", "--tenant", "acme", &id]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not a pending proposal"),
        "{}",
        text(&out.stderr)
    );

    let direct = remember(
        &["--bank-mode", "org=direct"],
        "Invoices are cut at midnight UTC.",
    );
    assert_eq!(direct["outcome"], "stored", "{direct}");
    let out = recall(data, &["--bank-mode", "org", "status"]);
    assert!(!out.status.success(), "a rule without a mode is refused");
}

/// A call that fails stops the import; the calls before it are written, the
/// error says which lines, `acknowledged_lines` is on stdout with `--json`,
/// and `--skip` that many imports the rest once the line is fixed.
#[test]
fn an_import_that_fails_says_what_is_written_and_resumes_with_skip() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = dir.path().join("memories.jsonl");
    let too_long = "x".repeat(20 * 1024);
    let contents = [
        "The staging database restarts every night at two.",
        "",
        "Release notes go in CHANGELOG.md under Unreleased.",
        "The payments team owns the ledger service.",
        too_long.as_str(),
        "Integration tests need the fake S3 server running.",
    ];
    let lines: Vec<String> = contents
        .iter()
        .map(|c| if c.is_empty() { String::new() } else { line(c) })
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let file_arg = file.to_str().unwrap();

    let out = recall(
        &data,
        &[
            "--json", "import", "--tenant", "acme", "--batch", "2", file_arg,
        ],
    );
    assert!(
        !out.status.success(),
        "the oversized line must fail its call"
    );
    let report = json(&out);
    // Calls of two memories: lines 1 and 3 are written, then the call of
    // lines 4 and 5 fails whole.
    assert_eq!(report["acknowledged_lines"], 3, "{report}");
    assert_eq!(report["stored"], 2, "{report}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("line 4") && stderr.contains("--skip 3"),
        "{stderr}"
    );
    let exported = recall(&data, &["export", "--tenant", "acme"]);
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    let exported = text(&exported.stdout);
    assert_eq!(exported.lines().count(), 2, "{exported}");
    assert!(
        !exported.contains("payments team"),
        "line 4 was not acknowledged"
    );

    // Fix the line, resume where the error said.
    let mut fixed = lines.clone();
    fixed[4] = line("Feature flags live in flags.toml, never in code.");
    std::fs::write(&file, fixed.join("\n")).unwrap();
    let out = recall(
        &data,
        &[
            "--json", "import", "--tenant", "acme", "--batch", "2", "--skip", "3", file_arg,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = json(&out);
    assert_eq!(
        (report["read"].as_u64(), report["stored"].as_u64()),
        (Some(3), Some(3)),
        "{report}"
    );
    assert_eq!(report["acknowledged_lines"], 6, "{report}");
    let exported = text(&recall(&data, &["export", "--tenant", "acme"]).stdout);
    assert_eq!(exported.lines().count(), 5, "{exported}");

    // A line that is not a memory stops the import before anything is written.
    std::fs::write(&file, format!("{}\n[1, 2]\n", line("One more note."))).unwrap();
    let out = recall(&data, &["import", "--tenant", "acme", file_arg]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("line 2") && stderr.contains("nothing was imported"),
        "{stderr}"
    );
    let exported = text(&recall(&data, &["export", "--tenant", "acme"]).stdout);
    assert_eq!(exported.lines().count(), 5, "{exported}");
}

//! `recall mcp` end to end, driven by a real MCP client: the official Python
//! SDK (`mcp==2.3.0`, installed by `scripts/setup.sh` into its own virtual
//! environment) runs `tests/mcp/e2e.py` against the built binary. What it
//! covers is listed at the top of each scenario there; each prints `ok ...`.

use std::path::PathBuf;
use std::process::Command;

/// The Python with the MCP SDK: `$RECALL_MCP_PYTHON`, or the setup script's
/// virtual environment.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("RECALL_MCP_PYTHON") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/recall/mcp-venv/bin/python")
}

/// Runs `tests/mcp/<script>` against the built binary, failing on a
/// non-zero exit or when one of `scenarios` did not print its `ok` line.
fn run_script(script: &str, scenarios: &[&str]) {
    let python = python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup.sh (it installs mcp==2.3.0 there)",
        python.display()
    );
    let work = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(script);
    let out = Command::new(&python)
        .arg(&script)
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_recall"))
        .arg("--work")
        .arg(work.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{} failed ({}):\n{stdout}\n{stderr}",
        script.display(),
        out.status
    );
    for scenario in scenarios {
        assert!(
            stdout.contains(&format!("ok {scenario}")),
            "{scenario} did not run:\n{stdout}"
        );
    }
}

#[test]
fn python_sdk_client_end_to_end() {
    run_script(
        "e2e.py",
        &[
            "list_tools",
            "remember_and_dedup",
            "recall_mark_used_end_session",
            "quarantine_stays_out",
            "bad_input_answered_server_keeps_serving",
            "proposals_wait_for_review",
            "restart_finds_everything",
            "other_tenant_sees_nothing",
            "two_clients_see_each_other",
            "killed_owner_loses_nothing_acknowledged",
            "all_there_after_restart",
            "owner_leaves_and_hands_over",
            "malformed_json_rpc",
            "path_like_tenant_refused",
        ],
    );
}

/// `recall mcp --http` (the `http` feature) with the SDK's Streamable HTTP
/// client: two sessions on one server, a session ended when its client
/// leaves, bad input, a web page's request refused, a stdio window
/// forwarding to it, SIGTERM handing the store over, loopback only.
#[cfg(feature = "http")]
#[test]
fn python_sdk_http_client_end_to_end() {
    run_script(
        "http_e2e.py",
        &[
            "http_two_sessions_see_each_other",
            "http_bad_input_answered",
            "http_session_ended_when_client_left",
            "http_only_the_endpoint_and_no_web_pages",
            "stdio_window_forwards_to_http_server",
            "http_server_stops_and_hands_over",
            "all_there_after_restart",
            "non_loopback_refused",
        ],
    );
}

//! The examples the README quotes run here, so they cannot rot.

#[path = "../examples/agent_loop.rs"]
mod agent_loop;

/// The agent loop's last task starts with what the first two taught.
#[tokio::test(flavor = "multi_thread")]
async fn agent_loop_remembers_across_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let briefing = agent_loop::run(dir.path()).await.unwrap();
    assert!(
        briefing.contains("rate-limits at 10 requests per second"),
        "{briefing}"
    );
    let engine = recall::Engine::open(recall::Config::new(dir.path()))
        .await
        .unwrap();
    let stored = engine.list("acme", Some("user:ana")).await.unwrap();
    assert!(
        stored.iter().any(|m| m.citations >= 1),
        "the hits the tasks used were cited"
    );
    let outcomes = stored
        .iter()
        .filter(|m| m.kind == recall::Kind::SessionOutcome)
        .count();
    assert!(outcomes >= 1, "the sessions stored their outcomes");
}

//! An agent's loop over the Rust API: recall before a task, put the briefing
//! in the prompt, remember what the task taught, tell memory which recalled
//! memories were used, end the session. The next task starts better.
//!
//! ```sh
//! cargo run --example agent_loop            # a temporary data directory
//! cargo run --example agent_loop -- ./data  # or this one
//! ```
//!
//! `engine/tests/examples.rs` runs it in CI.

use std::path::Path;

use recall::{Config, Engine, Kind, NewMemory, Remembered};

/// One task of the agent: what it is asked, and what doing it teaches.
struct Task {
    session: &'static str,
    ask: &'static str,
    lesson: Option<(Kind, &'static str)>,
}

const TASKS: [Task; 3] = [
    Task {
        session: "task-1",
        ask: "Add retries to the nightly export job",
        lesson: Some((
            Kind::Pitfall,
            "The export API rate-limits at 10 requests per second; retries without backoff get the job banned for an hour.",
        )),
    },
    Task {
        session: "task-2",
        ask: "Speed up the nightly export job",
        lesson: Some((
            Kind::Convention,
            "Batch jobs run with at most 4 workers so they stay under the export API's rate limit.",
        )),
    },
    Task {
        session: "task-3",
        ask: "Why does the export job get throttled?",
        lesson: None,
    },
];

/// The person's own bank, which their agent writes directly (a team's
/// bank, `org` or `repo:*`, would hold the agent's writes for review).
const BANK: &str = "user:ana";

/// Runs the three tasks against the store in `dir`; returns the briefing the
/// last task started with.
pub async fn run(dir: &Path) -> Result<String, Box<dyn std::error::Error>> {
    let engine = Engine::open(Config::new(dir)).await?;
    let mut last_briefing = String::new();
    for task in &TASKS {
        // 1. Before working: what do earlier sessions know about this?
        let recalled = engine
            .recall("acme", task.ask)
            .read([BANK, "org"])
            .session(task.session)
            .limit(5)
            .execute()
            .await?;
        let briefing = engine.briefing(&recalled.hits, 400);
        println!("== {} ==\n{}\n", task.ask, briefing);
        // (The agent would now put `briefing` into its prompt and work.)

        // 2. What the task taught goes to memory, durable when this returns.
        if let Some((kind, lesson)) = task.lesson {
            match engine
                .remember(NewMemory::new("acme", BANK, kind, lesson).element("ExportJob"))
                .await?
            {
                Remembered::Stored { id, .. } => println!("remembered {id}"),
                Remembered::Proposed { id, .. } => println!("proposed {id}: waits for review"),
                Remembered::Deduplicated { id, .. } => println!("already known as {id}"),
            }
        }

        // 3. The memories the agent relied on get a citation; ones shown and
        //    never used drift to review. Here: the top hit was used.
        let used: Vec<_> = recalled.hits.iter().take(1).map(|h| h.memory.id).collect();
        engine
            .end_session("acme", task.session)
            .used(used)
            .outcome(format!("Done: {}", task.ask))
            .bank(BANK)
            .element("ExportJob")
            .execute()
            .await?;
        last_briefing = briefing;
    }
    Ok(last_briefing)
}

#[allow(dead_code)] // the test includes this file for `run`
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::args().nth(1) {
        Some(dir) => {
            run(Path::new(&dir)).await?;
        }
        None => {
            let dir = tempfile::tempdir()?;
            run(dir.path()).await?;
        }
    }
    Ok(())
}

//! Proposals: with the default policy an agent's write into a `repo:*` bank
//! waits for review (not recalled until accepted, never once rejected), a
//! person's write is direct, the same lesson proposed twice is one
//! proposal, accepting applies the write path's rules (supersession, a
//! near copy served meanwhile, a taken title, a fork), and every decision
//! is audited and survives a reopen.

use std::path::Path;

use recall::{
    AuditOp, Config, Engine, Error, Kind, NewMemory, ProposalPolicy, ProposalStatus, Remembered,
    Trust,
};
use uuid::Uuid;

use super::{TENANT, model};

const REPO: &str = "repo:shop";

async fn open(dir: &Path) -> Engine {
    Engine::open(Config::new(dir).model(model())).await.unwrap()
}

fn agent(content: &str) -> NewMemory {
    NewMemory::new(TENANT, REPO, Kind::Convention, content).agent("agent/test")
}

/// The ids `query` recalls from the repository's bank.
async fn recalled(engine: &Engine, query: &str) -> Vec<Uuid> {
    engine
        .recall(TENANT, query)
        .read([REPO])
        .execute()
        .await
        .unwrap()
        .hits
        .iter()
        .map(|h| h.memory.id)
        .collect()
}

#[tokio::test]
async fn an_agents_write_into_a_shared_bank_waits_until_a_person_accepts_it() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let freeze = "Deploys are frozen from Friday 15:00 until Monday morning.";
    let question = "can I deploy on Friday afternoon?";

    // Held: stored, listed, not recalled, not in the bank's list.
    let proposed = engine.remember(agent(freeze)).await.unwrap();
    let Remembered::Proposed { id, supersedes, .. } = &proposed else {
        panic!("expected a proposal: {proposed:?}");
    };
    let id = *id;
    assert_eq!(*supersedes, None);
    assert!(!recalled(&engine, question).await.contains(&id));
    assert!(engine.list(TENANT, Some(REPO)).await.unwrap().is_empty());
    let m = engine.get(TENANT, id).await.unwrap();
    assert!(!m.is_active());
    let proposal = m.proposal.expect("a proposal");
    assert!(proposal.held && proposal.status == ProposalStatus::Pending);
    let pending = engine.proposals(TENANT).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].memory.id, id);
    assert_eq!(
        engine.review_queue(TENANT).await.unwrap().proposals.len(),
        1
    );

    // The same lesson proposed again confirms the pending proposal.
    let again = engine.remember(agent(freeze)).await.unwrap();
    assert!(
        matches!(again, Remembered::Deduplicated { id: into, .. } if into == id),
        "{again:?}"
    );
    assert_eq!(engine.proposals(TENANT).await.unwrap().len(), 1);
    assert_eq!(engine.get(TENANT, id).await.unwrap().confirmations, 1);

    // Accepted: recalled from now on.
    let accepted = engine.accept(TENANT, id, "ann").await.unwrap();
    assert!(accepted.is_active());
    assert_eq!(
        accepted.proposal.map(|p| p.status),
        Some(ProposalStatus::Accepted { by: "ann".into() })
    );
    assert_eq!(recalled(&engine, question).await.first(), Some(&id));
    assert!(engine.proposals(TENANT).await.unwrap().is_empty());
    assert!(matches!(
        engine.accept(TENANT, id, "ann").await,
        Err(Error::Conflict { .. })
    ));

    // Rejected: never recalled, and cannot be accepted afterwards.
    let noise = "Deploys on Fridays need two approvals from the release team.";
    let rejected = engine.remember(agent(noise)).await.unwrap().id();
    let after = engine
        .reject(
            TENANT,
            rejected,
            "bob",
            Some("we do not deploy on Fridays at all"),
        )
        .await
        .unwrap();
    assert_eq!(
        after.proposal.map(|p| p.status),
        Some(ProposalStatus::Rejected {
            by: "bob".into(),
            reason: Some("we do not deploy on Fridays at all".into())
        })
    );
    assert!(matches!(
        engine.accept(TENANT, rejected, "ann").await,
        Err(Error::Conflict { .. })
    ));
    assert!(
        !recalled(&engine, "Friday deploy approvals")
            .await
            .contains(&rejected)
    );

    // A person's write and an agent's session memory are direct.
    let direct = engine
        .remember(
            NewMemory::new(
                TENANT,
                REPO,
                Kind::Pitfall,
                "The staging database resets every night.",
            )
            .trust(Trust::User),
        )
        .await
        .unwrap();
    assert!(matches!(direct, Remembered::Stored { .. }), "{direct:?}");
    let scratch = engine
        .remember(NewMemory::new(
            TENANT,
            "session:s-1",
            Kind::Note,
            "Tried the staging reset twice.",
        ))
        .await
        .unwrap();
    assert!(matches!(scratch, Remembered::Stored { .. }), "{scratch:?}");
    assert!(
        recalled(&engine, "staging database reset")
            .await
            .contains(&direct.id())
    );

    // Both decisions are audited, with who made them.
    let audit = engine.audit(TENANT).await.unwrap();
    let by = |op: AuditOp, id: Uuid| {
        audit
            .iter()
            .find(|e| e.op == op && e.ids.first() == Some(&id.to_string()))
            .and_then(|e| e.actor.clone())
    };
    assert_eq!(by(AuditOp::Accept, id), Some("ann".into()));
    assert_eq!(by(AuditOp::Reject, rejected), Some("bob".into()));
    assert!(audit.iter().any(|e| e.op == AuditOp::Remember
        && e.ids == vec![id.to_string()]
        && e.detail.as_deref().is_some_and(|d| d.contains("proposed"))));

    // All of it survives a reopen.
    drop(engine);
    let engine = open(dir.path()).await;
    assert_eq!(recalled(&engine, question).await.first(), Some(&id));
    assert!(
        !recalled(&engine, "Friday deploy approvals")
            .await
            .contains(&rejected)
    );
    assert!(engine.proposals(TENANT).await.unwrap().is_empty());
}

#[tokio::test]
async fn accepting_applies_the_write_paths_rules() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let user = |content: &str| {
        NewMemory::new(TENANT, REPO, Kind::Fact, content)
            .trust(Trust::User)
            .title("Export limit")
    };
    let old = engine
        .remember(user("The export API allows 600 requests a minute."))
        .await
        .unwrap()
        .id();

    // A proposal that supersedes: the old memory stays served until the
    // proposal is accepted, then leaves recall; history shows the chain.
    let update = |content: &str| {
        NewMemory::new(TENANT, REPO, Kind::Fact, content)
            .supersedes("Export limit")
            .title("Export limit")
    };
    let first = engine
        .remember(update("The export API now allows 900 requests a minute."))
        .await
        .unwrap();
    assert!(
        matches!(&first, Remembered::Proposed { supersedes: Some(s), .. } if *s == old),
        "{first:?}"
    );
    // A second proposal to replace the same memory: a fork.
    let second = engine
        .remember(update(
            "The export API allows 1,000 requests a minute since May.",
        ))
        .await
        .unwrap();
    assert!(engine.get(TENANT, old).await.unwrap().is_active());
    let pending = engine.proposals(TENANT).await.unwrap();
    assert_eq!(pending.len(), 2);
    let diff = pending[0]
        .diff
        .as_deref()
        .expect("a diff against the old memory");
    assert!(diff.contains("[-600-]") && diff.contains("{+now"), "{diff}");
    assert_eq!(pending[0].against.as_ref().map(|m| m.id), Some(old));
    // The two are a fork: each names the other as its rival.
    assert_eq!(pending[0].rivals, vec![second.id()]);
    assert_eq!(pending[1].rivals, vec![first.id()]);

    engine.accept(TENANT, first.id(), "ann").await.unwrap();
    let replaced = engine.get(TENANT, old).await.unwrap();
    assert_eq!(replaced.superseded_by, Some(first.id()));
    let chain: Vec<Uuid> = engine
        .history(TENANT, first.id())
        .await
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(chain, vec![old, first.id()]);
    // The title moved with the supersession.
    let by_title = engine
        .remember(update("The export API allows 1,200 requests a minute."))
        .await
        .unwrap();
    assert!(
        matches!(&by_title, Remembered::Proposed { supersedes: Some(s), .. } if *s == first.id()),
        "{by_title:?}"
    );
    // The fork's other branch is refused and stays pending for a person.
    let fork = engine.accept(TENANT, second.id(), "ann").await;
    assert!(
        matches!(fork, Err(Error::Conflict { id, .. }) if id == old),
        "{fork:?}"
    );
    assert!(
        engine
            .proposals(TENANT)
            .await
            .unwrap()
            .iter()
            .any(|p| p.memory.id == second.id())
    );
    engine
        .reject(TENANT, second.id(), "ann", Some("a fork"))
        .await
        .unwrap();

    // A proposal whose text a person wrote meanwhile folds into it when accepted.
    let lesson = "Always run the migrations before the deploy, never after.";
    let proposal = engine
        .remember(NewMemory::new(TENANT, REPO, Kind::Convention, lesson))
        .await
        .unwrap()
        .id();
    let written = engine
        .remember(NewMemory::new(TENANT, REPO, Kind::Convention, lesson).trust(Trust::User))
        .await
        .unwrap();
    assert!(
        matches!(written, Remembered::Stored { .. }),
        "a person's write is not a proposal's copy"
    );
    let folded = engine.accept(TENANT, proposal, "ann").await.unwrap();
    assert_eq!(folded.superseded_by, Some(written.id()));
    assert_eq!(
        engine
            .get(TENANT, written.id())
            .await
            .unwrap()
            .confirmations,
        1
    );

    // A proposal whose title another memory took meanwhile is refused.
    let titled = engine
        .remember(agent("Releases are tagged vMAJOR.MINOR.PATCH.").title("Release tags"))
        .await
        .unwrap()
        .id();
    engine
        .remember(
            NewMemory::new(
                TENANT,
                REPO,
                Kind::Convention,
                "Tag releases with the date.",
            )
            .trust(Trust::User)
            .title("Release tags"),
        )
        .await
        .unwrap();
    assert!(matches!(
        engine.accept(TENANT, titled, "ann").await,
        Err(Error::TitleTaken { .. })
    ));

    // Unknown ids and memories that are not proposals are told apart.
    assert!(matches!(
        engine.accept(TENANT, Uuid::now_v7(), "ann").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        engine.reject(TENANT, written.id(), "ann", None).await,
        Err(Error::Conflict { .. })
    ));
    assert!(matches!(
        engine.accept(TENANT, titled, "").await,
        Err(Error::InvalidInput { .. })
    ));
}

#[tokio::test]
async fn a_policy_of_direct_banks_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new(dir.path()).model(model()).proposals(
        ProposalPolicy::direct()
            .rule("team:*", recall::BankMode::Propose)
            .unwrap(),
    );
    let engine = Engine::open(config).await.unwrap();
    let repo = engine
        .remember(agent("Use rustfmt's defaults."))
        .await
        .unwrap();
    assert!(matches!(repo, Remembered::Stored { .. }), "{repo:?}");
    let team = engine
        .remember(NewMemory::new(
            TENANT,
            "team:core",
            Kind::Convention,
            "Review within a day.",
        ))
        .await
        .unwrap();
    assert!(matches!(team, Remembered::Proposed { .. }), "{team:?}");
}

/// Replaces the batch's two memories by one note.
struct Merge;

impl recall::Consolidator for Merge {
    fn propose(&self, batch: &recall::ConsolidationBatch) -> Vec<recall::Proposal> {
        vec![recall::Proposal::Replace {
            old: batch.memories.iter().map(|m| m.id).collect(),
            memory_kind: Kind::Convention,
            content: "Deploys need a green build and one approval.".into(),
            elements: Vec::new(),
        }]
    }
}

#[tokio::test]
async fn a_consolidation_that_replaces_team_memories_waits_for_review() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let mut old = Vec::new();
    for text in [
        "Deploys need a green build.",
        "A deploy needs one approval.",
    ] {
        let m = NewMemory::new(TENANT, REPO, Kind::Convention, text).trust(Trust::User);
        old.push(engine.remember(m).await.unwrap().id());
    }
    let pass = engine
        .consolidate(TENANT)
        .consolidator(Merge)
        .execute()
        .await
        .unwrap();
    let outcome = &pass.proposals[0];
    assert!(outcome.applied && outcome.pending, "{outcome:#?}");
    let merged = outcome.memory.expect("the proposal");
    for id in &old {
        assert!(
            engine.get(TENANT, *id).await.unwrap().is_active(),
            "served until accepted"
        );
    }
    let pending = engine.proposals(TENANT).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        pending[0]
            .memory
            .proposal
            .as_ref()
            .map(|p| p.supersedes.clone()),
        Some(old.clone())
    );
    engine.accept(TENANT, merged, "ann").await.unwrap();
    for id in &old {
        let m = engine.get(TENANT, *id).await.unwrap();
        assert_eq!(m.superseded_by, Some(merged), "{m:?}");
    }
    assert!(engine.get(TENANT, merged).await.unwrap().is_active());
}

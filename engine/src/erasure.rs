//! Right-to-erasure (§6 `erase`): physical removal, unlike `forget`.

use recall_indexer::{AuditOp, EraseSelector};
use serde::Serialize;
use uuid::Uuid;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::state::State;
use crate::validate;

/// What [`Engine::erase`] removes, always within one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EraseScope {
    /// One memory.
    Memory(Uuid),
    /// Every memory of a bank (e.g. a person's `user:<id>`).
    Bank(String),
    /// Everything the tenant stored.
    Tenant,
}

/// The outcome of an erasure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Erased {
    /// The tenant.
    pub tenant: String,
    /// The memories whose text and vectors were removed.
    pub ids: Vec<Uuid>,
}

impl Engine {
    /// Removes memories physically (§6): their rows, events and vectors
    /// from the LanceDB tables (fragments rewritten, old versions pruned),
    /// their documents from the BM25 index (segments merged, old files
    /// collected), and every copy in the write-ahead log. Afterwards no byte
    /// of their text or vector remains in any file under the data directory;
    /// `get`, `history`, `list` and `recall` know nothing of them. The audit
    /// log records the erasure (ids, time, actor — no content) before it
    /// starts; an erasure a crash interrupts is finished at the next open.
    ///
    /// Costly by design (it rewrites table files and reloads the state):
    /// meant for right-to-erasure requests, not for routine deletion — use
    /// [`Engine::forget`] for that.
    ///
    /// ```
    /// use recall::{Config, Engine, EraseScope, Kind, ModelSource, NewMemory};
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// let dir = tempfile::tempdir()?;
    /// let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
    /// let id = engine
    ///     .remember(NewMemory::new("acme", "user:bob", Kind::Preference, "Bob likes dark mode"))
    ///     .await?
    ///     .id();
    /// let erased = engine.erase("acme", EraseScope::Bank("user:bob".into()), "dpo@acme").await?;
    /// assert_eq!(erased.ids, vec![id]);
    /// assert!(engine.get("acme", id).await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn erase(&self, tenant: &str, scope: EraseScope, actor: &str) -> Result<Erased> {
        validate::scope_name("tenant", tenant)?;
        // Writers decide and persist under the store lock: holding it from
        // here, the ids audited are exactly the ids erased.
        let mut store = self.lock_store().await;
        let (selector, ids, detail) = {
            let state = self.read_state()?;
            let t = state.tenant(tenant);
            match &scope {
                EraseScope::Memory(id) => {
                    if t.and_then(|t| t.get(id)).is_none() {
                        return Err(Error::not_found(tenant, id));
                    }
                    let selector = EraseSelector::Memories {
                        tenant: tenant.to_string(),
                        ids: vec![id.to_string()],
                    };
                    (selector, vec![*id], "memory".to_string())
                }
                EraseScope::Bank(bank) => {
                    validate::scope_name("bank", bank)?;
                    let ids = t
                        .map(|t| {
                            t.memories
                                .iter()
                                .enumerate()
                                .filter(|&(i, _)| t.bank_of(i) == bank.as_str())
                                .map(|(_, m)| m.id)
                                .collect()
                        })
                        .unwrap_or_default();
                    let selector = EraseSelector::Bank {
                        tenant: tenant.to_string(),
                        bank: bank.clone(),
                    };
                    (selector, ids, format!("bank {bank}"))
                }
                EraseScope::Tenant => {
                    let ids = t
                        .map(|t| t.memories.iter().map(|m| m.id).collect())
                        .unwrap_or_default();
                    let selector = EraseSelector::Tenant {
                        tenant: tenant.to_string(),
                    };
                    (selector, ids, "tenant".to_string())
                }
            }
        };
        let entry = self
            .audit_entry(tenant, AuditOp::Erase, &ids)
            .actor(Some(actor.to_string()))
            .detail(Some(detail));
        let now_ms = entry.at_ms;

        // The derived files hold the tenant's vectors (and averages of them).
        crate::derived::forget_tenant(&self.config().data_dir, tenant)?;
        store.audit(&[entry]).await?;
        let erased = match store.erase(&selector).await {
            Ok(erased) => erased,
            Err(e) => {
                // Stopped part-way: some copies may be gone already. Nothing
                // it covers is served again; the next open finishes it.
                if let Some(unfinished) = store.unfinished_erase() {
                    let mut state = State::new(self.dim());
                    state.apply_all(store.records_outside(unfinished).await?);
                    *self.write_state()? = state;
                }
                return Err(e.into());
            }
        };
        tracing::info!(tenant, memories = erased.len(), "erasure done");
        let mut state = State::new(self.dim());
        state.apply_all(store.load_all().await?);
        *self.write_state()? = state;
        // Keeps sequence numbers rising past the erased rows after a reopen.
        let marker = Event::Erased {
            memories: erased.len(),
        };
        self.persist(&mut store, vec![marker.record(tenant, None, now_ms)])
            .await?;
        Ok(Erased {
            tenant: tenant.to_string(),
            ids: erased
                .iter()
                .filter_map(|id| Uuid::parse_str(id).ok())
                .collect(),
        })
    }
}

//! The tenant stores a node has open: one engine per tenant, on its own
//! prefix `ROOT/tenants/<segment>` with its own writer lease, and its own
//! cache directory `CACHE/tenants/<segment>`. Calls for an open tenant run
//! under a read guard; closing one (it moved to another node) takes the
//! write guard, so calls in flight finish before its lease is released.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use recall::{Config, Engine, Error, IndexerError, ModelSource, ProposalPolicy, Remote};
use tokio::sync::RwLock;

use super::placement::segment;
use super::wire::Call;
use crate::mcp::tools::{self, Output, Policy, ToolError, ToolErrorKind};

/// One tenant's engine (once opened) and when a call last used it. A
/// slot stays in the map once made (a closed one is a few bytes), so a
/// call and a close never hold two different slots for one tenant.
struct Slot {
    engine: RwLock<Option<Engine>>,
    used: Mutex<Instant>,
}

impl Slot {
    fn touch(&self) {
        *self.used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }
}

/// What a call on this node came to.
pub type Ran = Result<Output, ToolError>;

/// Why a tenant could not be opened here.
pub enum NotOpened {
    /// Another process holds its writer lease (`node`: the recall node, if
    /// it is one).
    Held {
        node: Option<String>,
        why: String,
    },
    Failed(String),
}

/// The open tenants and how to open another.
pub struct Tenants {
    root: Remote,
    cache: PathBuf,
    model: ModelSource,
    proposals: ProposalPolicy,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl Tenants {
    pub fn new(
        root: Remote,
        cache: PathBuf,
        model: ModelSource,
        proposals: ProposalPolicy,
    ) -> Tenants {
        Tenants {
            root,
            cache,
            model,
            proposals,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, tenant: &str) -> Option<Arc<Slot>> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.get(tenant).cloned()
    }

    fn slot_or_new(&self, tenant: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let slot = slots.entry(tenant.to_string()).or_insert_with(|| {
            Arc::new(Slot {
                engine: RwLock::new(None),
                used: Mutex::new(Instant::now()),
            })
        });
        Arc::clone(slot)
    }

    /// The tenants open here, sorted.
    pub fn open(&self) -> Vec<String> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut open: Vec<String> = slots
            .iter()
            // A slot being opened or closed (write-locked) counts as open.
            .filter(|(_, slot)| match slot.engine.try_read() {
                Ok(engine) => engine.is_some(),
                Err(_) => true,
            })
            .map(|(tenant, _)| tenant.clone())
            .collect();
        open.sort();
        open
    }

    /// Runs `call` if its tenant is open here.
    pub async fn run_if_open(&self, call: &Call) -> Option<Ran> {
        let slot = self.slot(&call.tenant)?;
        slot.touch();
        let ran = {
            let engine = slot.engine.read().await;
            run(engine.as_ref()?, call).await
        };
        Some(self.settle(&slot, call, ran).await)
    }

    /// Opens the tenant's store (waiting up to `wait` for another process's
    /// lease, or the default 1.5 × ttl when `None`) and runs `call`.
    pub async fn open_and_run(
        &self,
        call: &Call,
        wait: Option<Duration>,
    ) -> Result<Ran, NotOpened> {
        let slot = self.slot_or_new(&call.tenant);
        slot.touch();
        let mut engine = slot.engine.write().await;
        if engine.is_none() {
            *engine = Some(self.open_store(&call.tenant, wait).await?);
        }
        let engine = engine.downgrade();
        let ran = match engine.as_ref() {
            Some(engine) => run(engine, call).await,
            None => return Err(NotOpened::Failed("closed while opening".into())),
        };
        drop(engine);
        Ok(self.settle(&slot, call, ran).await)
    }

    async fn open_store(&self, tenant: &str, wait: Option<Duration>) -> Result<Engine, NotOpened> {
        let segment = segment(tenant);
        let mut remote = self
            .root
            .join(&format!("tenants/{segment}"))
            .map_err(|e| NotOpened::Failed(e.to_string()))?;
        if let Some(wait) = wait {
            remote = remote.lease_wait(wait);
        }
        let config = Config::new(self.cache.join("tenants").join(&segment))
            .remote(remote)
            .model(self.model.clone())
            .proposals(self.proposals.clone());
        let returning = crate::returning_freed_pages();
        let opened = Engine::open(config).await;
        drop(returning);
        match opened {
            Ok(engine) => {
                tracing::info!(tenant, "opened the tenant's store");
                Ok(engine)
            }
            Err(Error::Storage(e @ IndexerError::LeaseHeld { .. })) => {
                let why = e.to_string();
                let IndexerError::LeaseHeld { node, .. } = e else {
                    return Err(NotOpened::Failed(why));
                };
                Err(NotOpened::Held { node, why })
            }
            Err(e) => Err(NotOpened::Failed(format!("opening tenant {tenant}: {e}"))),
        }
    }

    /// A call that found the engine's lease lost closes the engine, so the
    /// next call reopens the store (or finds who holds it now).
    async fn settle(&self, slot: &Slot, call: &Call, ran: Ran) -> Ran {
        if let Err(e) = &ran
            && e.kind == ToolErrorKind::Unavailable
        {
            tracing::warn!(tenant = call.tenant, error = %e, "closing a tenant whose lease is lost");
            slot.engine.write().await.take();
        }
        ran
    }

    /// Closes the tenant's store (calls in flight finish first) and gives
    /// its lease up, so the node it moved to takes it at once.
    pub async fn close(&self, tenant: &str) {
        let Some(slot) = self.slot(tenant) else {
            return;
        };
        let engine = slot.engine.write().await.take();
        if let Some(engine) = engine {
            match engine.close().await {
                Ok(()) => tracing::info!(tenant, "closed the tenant's store"),
                Err(e) => tracing::warn!(tenant, error = %e, "closing a tenant's store"),
            }
        }
    }

    /// The open tenants no call has used for `longer` (an idle tenant
    /// holds memory, a cache directory and a lease renewed four times a ttl).
    pub fn idle(&self, longer: Duration) -> Vec<String> {
        let open = self.open();
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        open.into_iter()
            .filter(|tenant| {
                slots
                    .get(tenant)
                    .is_some_and(|slot| slot.idle_for() > longer)
            })
            .collect()
    }

    /// Closes every tenant (the node is stopping).
    pub async fn close_all(&self) {
        let tenants: Vec<String> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.keys().cloned().collect()
        };
        for tenant in tenants {
            self.close(&tenant).await;
        }
    }
}

/// Runs one call through `recall mcp`'s tools, under the call's scope.
async fn run(engine: &Engine, call: &Call) -> Ran {
    let read = if call.read.is_empty() {
        vec![call.write_bank.clone()]
    } else {
        call.read.clone()
    };
    let policy = Policy {
        tenant: call.tenant.clone(),
        read,
        write_bank: call.write_bank.clone(),
        agent: call.agent.clone(),
    };
    tools::call(
        engine,
        &policy,
        &call.session,
        &call.tool,
        call.args.clone(),
    )
    .await
}

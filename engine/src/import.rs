//! Bulk import: [`Engine::import`], its batch size, and the JSONL import
//! format (one memory per line, as the JSON of [`NewMemory`] without
//! `tenant`: the importer names the tenant, so a file cannot write into
//! another tenant).

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::memory::{NewMemory, Remembered};

/// Memories per call of a bulk import ([`Engine::import`], which `recall
/// import` and `recall-bench scale` use).
/// Larger calls amortize what each call does once: the write path's
/// near-copy probe reads each list of a partitioned tenant once for all of
/// the call's items, and the call is logged as one fsynced frame. A
/// million-memory import into one tenant (`recall-bench scale`, 2 cores,
/// vectors given; one day's runs, which vary by about ±10 %) ran at
/// 17.6–17.9k memories/s in calls of 1,000, 19.4–22.4k in calls of 5,000
/// and 21.3k in calls of 10,000.
pub const IMPORT_BATCH: usize = 5_000;

impl Engine {
    /// Writes `memories` in calls of `batch` items, each with the rules and
    /// the all-or-nothing durability of [`Engine::remember_many`], in order
    /// (a later call deduplicates against everything before it).
    ///
    /// The steps that need no lock (validation, redaction, screening, and
    /// pulling the next items from `memories`) run for the next call while
    /// this one is applied to the in-memory state, beside the apply, which
    /// is mostly one thread (a small gain on 2 cores, about 1 % of a
    /// 1M-memory import: the probe, the log and the background flushes
    /// already keep both busy most of the time). Recalls wait while a call
    /// is applied, as they do for `remember_many`; in a 1M import the
    /// preparation alone took 32 ms of wall time per call of 5,000 and
    /// the apply 77 ms. `committed` sees each call's outcomes once the call is
    /// durable. An error stops the import: the calls `committed` saw are
    /// written, the failed call and everything after it are not. Other
    /// writers may interleave between calls. A finished import saves the
    /// vector partitions it grew (`derived/partitions/`), so the next open
    /// restores them instead of training them.
    ///
    /// ```no_run
    /// # async fn demo(engine: &recall::Engine, memories: Vec<recall::NewMemory>) -> recall::Result<()> {
    /// let mut stored = 0;
    /// engine
    ///     .import(memories, recall::IMPORT_BATCH, |outcomes| stored += outcomes.len())
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn import<I, F>(&self, memories: I, batch: usize, mut committed: F) -> Result<()>
    where
        I: IntoIterator<Item = NewMemory>,
        I::IntoIter: Send,
        F: FnMut(&[Remembered]),
    {
        if batch == 0 {
            return Err(Error::invalid(
                "batch",
                "an import writes at least 1 memory per call",
            ));
        }
        let mut source = memories.into_iter();
        let mut next = self.prepare_many(source.by_ref().take(batch).collect());
        loop {
            let prepared = next?;
            if prepared.is_empty() {
                // The partitions the import grew, for the next open.
                self.save_partitions(&*self.lock_store().await);
                return Ok(());
            }
            let prepared = self.embed_missing(prepared).await?;
            let source = &mut source;
            let (outcomes, following) = self
                .write_prepared(prepared, || {
                    self.prepare_many(source.by_ref().take(batch).collect())
                })
                .await?;
            committed(&outcomes);
            next = following;
        }
    }
}

/// Parses one line of an import file for `tenant`. Blank lines are `None`;
/// anything that is not a memory object is a typed error. A `tenant` key in
/// the line is overridden, never trusted.
///
/// ```
/// let m = recall::parse_import_line("acme", r#"{"bank":"org","kind":"note","content":"deploys at noon","tenant":"other"}"#)?
///     .expect("a memory");
/// assert_eq!(m.tenant, "acme");
/// assert!(recall::parse_import_line("acme", "   ")?.is_none());
/// // Precomputed embeddings, the sentences' too (checked when written).
/// let line = r#"{"bank":"org","kind":"note","content":"Deploys at noon. Never on Friday.",
///                "vector":[0.6,0.8],"sentence_vectors":[[1,0],[0,1]]}"#;
/// let m = recall::parse_import_line("acme", &line.replace('\n', " "))?.expect("a memory");
/// assert_eq!((m.vector.map(|v| v.len()), m.sentence_vectors.len()), (Some(2), 2));
/// assert!(recall::parse_import_line("acme", "[1, 2]").is_err());
/// # Ok::<(), recall::Error>(())
/// ```
pub fn parse_import_line(tenant: &str, line: &str) -> Result<Option<NewMemory>> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let mut value: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| Error::invalid("import line", format!("not JSON: {e}")))?;
    let Some(object) = value.as_object_mut() else {
        return Err(Error::invalid("import line", "expected a JSON object"));
    };
    object.insert(
        "tenant".into(),
        serde_json::Value::String(tenant.to_string()),
    );
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| Error::invalid("import line", format!("not a memory: {e}")))
}

//! The JSONL import format: one memory per line, as the JSON of
//! [`NewMemory`] without `tenant` (the importer names the tenant, so a file
//! cannot write into another tenant).

use crate::error::{Error, Result};
use crate::memory::NewMemory;

/// Memories per [`crate::Engine::remember_many`] call in a bulk import
/// (`recall import`; `recall-bench scale` times its import the same way).
/// Larger calls amortize what each call does once: the write path's
/// near-copy probe reads each list of a partitioned tenant once for all of
/// the call's items, and the call is logged as one fsynced frame. A
/// million-memory import into one tenant (`recall-bench scale`, 2 cores,
/// vectors given; one day's runs, which vary by about ±10 %) ran at
/// 17.6–17.9k memories/s in calls of 1,000, 19.4–22.4k in calls of 5,000
/// and 21.3k in calls of 10,000.
pub const IMPORT_BATCH: usize = 5_000;

/// Parses one line of an import file for `tenant`. Blank lines are `None`;
/// anything that is not a memory object is a typed error. A `tenant` key in
/// the line is overridden, never trusted.
///
/// ```
/// let m = recall::parse_import_line("acme", r#"{"bank":"org","kind":"note","content":"deploys at noon","tenant":"other"}"#)?
///     .expect("a memory");
/// assert_eq!(m.tenant, "acme");
/// assert!(recall::parse_import_line("acme", "   ")?.is_none());
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

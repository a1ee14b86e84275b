//! Read policies (§7): which banks of a tenant a caller may read.
//!
//! Reading is one-directional and explicit: a personal profile reads its own
//! `user:<id>` bank and the shared `org` bank; an org profile reads `org`
//! only, never a user's bank. A `session:<id>` bank is readable only by a
//! policy that carries that session (and only until the session ends).

use serde::Serialize;

/// The banks a caller may read in one tenant, and the session it is in.
///
/// ```
/// use recall::ReadPolicy;
/// let alice = ReadPolicy::personal("alice").session("s-42");
/// assert!(alice.can_read("user:alice") && alice.can_read("org") && alice.can_read("session:s-42"));
/// assert!(!alice.can_read("user:bob") && !alice.can_read("session:s-41"));
/// let org = ReadPolicy::org();
/// assert!(org.can_read("org") && !org.can_read("user:alice"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ReadPolicy {
    banks: Vec<String>,
    session: Option<String>,
}

impl ReadPolicy {
    /// Reads exactly these banks (plus the session's bank once [`ReadPolicy::session`] is set).
    pub fn banks<I, S>(banks: I) -> ReadPolicy
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut policy = ReadPolicy::default();
        for bank in banks {
            policy = policy.with_bank(bank);
        }
        policy
    }

    /// A person's profile: `user:<user>` and `org`.
    pub fn personal(user: &str) -> ReadPolicy {
        ReadPolicy::banks([format!("user:{user}"), "org".to_string()])
    }

    /// The organisation's profile: `org` only.
    pub fn org() -> ReadPolicy {
        ReadPolicy::banks(["org"])
    }

    /// Adds a readable bank. A `session:<id>` bank added here is still
    /// readable only with that session set.
    pub fn with_bank(mut self, bank: impl Into<String>) -> ReadPolicy {
        let bank = bank.into();
        if !self.banks.contains(&bank) {
            self.banks.push(bank);
        }
        self
    }

    /// The caller's session: its `session:<id>` bank becomes readable.
    pub fn session(mut self, session: impl Into<String>) -> ReadPolicy {
        let session = session.into();
        self = self.with_bank(format!("session:{session}"));
        self.session = Some(session);
        self
    }

    /// The session, if any.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The banks named, in order.
    pub fn bank_names(&self) -> &[String] {
        &self.banks
    }

    /// Whether a memory in `bank` may be served to this caller (the session's
    /// end is checked by the engine, which knows it).
    pub fn can_read(&self, bank: &str) -> bool {
        if let Some(session) = bank.strip_prefix("session:") {
            return self.session.as_deref() == Some(session)
                && self.banks.iter().any(|b| b == bank);
        }
        self.banks.iter().any(|b| b == bank)
    }
}

//! Bank policies (§7): which banks of a tenant a caller may read
//! ([`ReadPolicy`]), and which take an agent's write directly and which
//! hold it as a proposal until a person accepts it ([`ProposalPolicy`]).
//!
//! Reading is one-directional and explicit: a personal profile reads its own
//! `user:<id>` bank and the shared `org` bank; an org profile reads `org`
//! only, never a user's bank. A `session:<id>` bank is readable only by a
//! policy that carries that session (and only until the session ends).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::memory::Trust;

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

/// How a bank takes a write ([`ProposalPolicy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BankMode {
    /// Stored and served at once.
    Direct,
    /// Stored durably as a proposal (redacted, screened, audited like any
    /// write) and served only once accepted ([`crate::Engine::accept`]).
    Propose,
}

/// Which banks take an agent's writes directly and which hold them as
/// proposals, like a pull request against what a whole team reads: rules
/// of a bank name or a prefix ending in `*`, the first match deciding. A
/// bank no rule matches is direct; a write with [`Trust::User`] (a person
/// wrote it) is always direct.
///
/// The default: `session:*` and `user:*` direct, `repo:*`, `org` and
/// `org:*` propose.
///
/// ```
/// use recall::{BankMode, ProposalPolicy, Trust};
/// let policy = ProposalPolicy::default();
/// assert_eq!(policy.mode("repo:api", Trust::Agent), BankMode::Propose);
/// assert_eq!(policy.mode("repo:api", Trust::User), BankMode::Direct);
/// assert_eq!(policy.mode("session:s-1", Trust::Agent), BankMode::Direct);
/// let open = ProposalPolicy::direct().rule("org", BankMode::Propose)?;
/// assert_eq!(open.mode("repo:api", Trust::Agent), BankMode::Direct);
/// assert_eq!(open.mode("org", Trust::External), BankMode::Propose);
/// # Ok::<(), recall::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProposalPolicy {
    rules: Vec<(String, BankMode)>,
}

impl Default for ProposalPolicy {
    fn default() -> Self {
        ProposalPolicy {
            rules: [
                ("session:*", BankMode::Direct),
                ("user:*", BankMode::Direct),
                ("repo:*", BankMode::Propose),
                ("org", BankMode::Propose),
                ("org:*", BankMode::Propose),
            ]
            .into_iter()
            .map(|(p, m)| (p.to_string(), m))
            .collect(),
        }
    }
}

impl ProposalPolicy {
    /// Every bank direct: no write waits for review.
    pub fn direct() -> ProposalPolicy {
        ProposalPolicy { rules: Vec::new() }
    }

    /// Adds a rule ahead of the others: `pattern` is a bank name, or a
    /// prefix followed by `*`. A pattern that no bank name could match is
    /// an [`Error::Invalid`].
    pub fn rule(mut self, pattern: impl Into<String>, mode: BankMode) -> Result<ProposalPolicy> {
        let pattern = pattern.into();
        if pattern != "*" {
            // `repo:*` checks `repo`: a prefix may end in the separator.
            let name = pattern.strip_suffix('*').unwrap_or(&pattern);
            crate::validate::scope_name("bank pattern", name.trim_end_matches(':'))?;
        }
        self.rules.insert(0, (pattern, mode));
        Ok(self)
    }

    /// Reads a rule written `PATTERN=direct` or `PATTERN=propose` (the
    /// CLI's and the MCP server's `--bank-mode`) and adds it ahead of the
    /// others.
    ///
    /// ```
    /// use recall::{BankMode, ProposalPolicy, Trust};
    /// let policy = ProposalPolicy::default().parse_rule("repo:scratch=direct")?;
    /// assert_eq!(policy.mode("repo:scratch", Trust::Agent), BankMode::Direct);
    /// assert!(ProposalPolicy::default().parse_rule("repo:*").is_err());
    /// # Ok::<(), recall::Error>(())
    /// ```
    pub fn parse_rule(self, text: &str) -> Result<ProposalPolicy> {
        let bad = || {
            Error::invalid(
                "bank mode",
                format!("`{text}` is not PATTERN=direct or PATTERN=propose"),
            )
        };
        let (pattern, mode) = text.split_once('=').ok_or_else(bad)?;
        let mode = match mode.trim() {
            "direct" => BankMode::Direct,
            "propose" => BankMode::Propose,
            _ => return Err(bad()),
        };
        self.rule(pattern.trim(), mode)
    }

    /// How `bank` takes a write of `trust`.
    pub fn mode(&self, bank: &str, trust: Trust) -> BankMode {
        if trust == Trust::User {
            return BankMode::Direct;
        }
        self.rules
            .iter()
            .find(|(pattern, _)| match pattern.strip_suffix('*') {
                Some(prefix) => bank.starts_with(prefix),
                None => bank == pattern,
            })
            .map_or(BankMode::Direct, |(_, mode)| *mode)
    }
}

//! Where a store keeps its truth when it is not its own directory: an
//! S3-compatible bucket ([`Remote`], set in [`crate::StoreOptions::remote`]).
//!
//! The LanceDB tables live at `URI/tables` (Lance commits a table version
//! with a conditional PUT, so concurrent commits never overwrite each
//! other). The write-ahead log lives at `URI/wal/`: each acknowledged batch
//! is one object, named by its first sequence number, written with
//! `If-None-Match: *` before the call returns (`object_log.rs`). The data
//! directory becomes a cache of what is derived (the BM25 index, the
//! vector files and partitions) plus the process's lock.

use std::fmt;
use std::time::Duration;

use crate::error::{IndexerError, Result};

#[cfg(feature = "s3")]
mod audit_objects;
#[cfg(feature = "s3")]
mod lease;
#[cfg(feature = "s3")]
mod members;
#[cfg(feature = "s3")]
pub(crate) mod object_log;

#[cfg(feature = "s3")]
pub use members::{Member, Members, validate_node_id};

/// An object-store failure as the store reports it.
#[cfg(feature = "s3")]
fn failed(
    operation: &'static str,
    location: &object_store::path::Path,
    error: &object_store::Error,
) -> IndexerError {
    IndexerError::ObjectStore {
        operation,
        location: location.to_string(),
        detail: error.to_string(),
    }
}

/// Every object under `dir` (the log, the audit log, the nodes).
#[cfg(feature = "s3")]
async fn list_all(
    store: &dyn object_store::ObjectStore,
    dir: &object_store::path::Path,
) -> Result<Vec<object_store::ObjectMeta>> {
    use futures::TryStreamExt;
    store
        .list(Some(dir))
        .try_collect()
        .await
        .map_err(|e| failed("list", dir, &e))
}

/// The URI scheme this build stores on besides a local directory.
const SCHEME: &str = "s3://";

/// How long a writer's lease lasts unless renewed ([`Remote::lease_ttl`]).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

/// An S3-compatible location (`s3://bucket/prefix`) and the options to
/// reach it (object_store's and Lance's keys: `aws_endpoint`,
/// `aws_access_key_id`, `aws_secret_access_key`, `aws_region`,
/// `aws_allow_http`, `aws_virtual_hosted_style_request`, ...).
///
/// ```
/// use recall_indexer::Remote;
/// let remote = Remote::new("s3://memories/team-a/")?
///     .option("aws_endpoint", "http://127.0.0.1:8333")
///     .option("aws_allow_http", "true");
/// assert_eq!(remote.uri(), "s3://memories/team-a");
/// assert_eq!(remote.bucket(), "memories");
/// # Ok::<(), recall_indexer::IndexerError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Remote {
    uri: String,
    options: Vec<(String, String)>,
    lease_ttl: Duration,
    lease_wait: Option<Duration>,
    node: Option<String>,
}

impl Remote {
    /// A location with no options (credentials and endpoint then come from
    /// nowhere: see [`Remote::from_env`]). The URI must be
    /// `s3://bucket` or `s3://bucket/prefix`; a trailing `/` is dropped.
    pub fn new(uri: &str) -> Result<Remote> {
        let invalid = |reason: &str| IndexerError::InvalidRemote {
            uri: uri.to_string(),
            reason: reason.to_string(),
        };
        let rest = uri
            .strip_prefix(SCHEME)
            .ok_or_else(|| invalid("only s3:// locations are supported"))?;
        let rest = rest.trim_end_matches('/');
        let bucket = rest.split('/').next().unwrap_or_default();
        if bucket.is_empty() {
            return Err(invalid("the bucket name is missing"));
        }
        if rest
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return Err(invalid("a path segment is empty, `.` or `..`"));
        }
        Ok(Remote {
            uri: format!("{SCHEME}{rest}"),
            options: Vec::new(),
            lease_ttl: DEFAULT_LEASE_TTL,
            lease_wait: None,
            node: None,
        })
    }

    /// The location `segment` below this one, with the same options, lease
    /// settings and node (a node's tenant stores sit below its root).
    ///
    /// ```
    /// use recall_indexer::Remote;
    /// let root = Remote::new("s3://memories/fleet")?.option("aws_region", "eu-west-1");
    /// let tenant = root.join("tenants/acme")?;
    /// assert_eq!(tenant.uri(), "s3://memories/fleet/tenants/acme");
    /// assert_eq!(tenant.get("aws_region"), Some("eu-west-1"));
    /// assert!(root.join("../other").is_err());
    /// # Ok::<(), recall_indexer::IndexerError>(())
    /// ```
    pub fn join(&self, segment: &str) -> Result<Remote> {
        let mut joined = Remote::new(&format!("{}/{segment}", self.uri))?;
        joined.options = self.options.clone();
        joined.lease_ttl = self.lease_ttl;
        joined.lease_wait = self.lease_wait;
        joined.node = self.node.clone();
        Ok(joined)
    }

    /// Names the recall node (`recall serve --node-id`) this process is: the
    /// writer's lease records it, so another node that finds the store held
    /// knows where to forward ([`crate::IndexerError::LeaseHeld`]'s `node`).
    pub fn node(mut self, node: impl Into<String>) -> Remote {
        self.node = Some(node.into());
        self
    }

    /// The node set by [`Remote::node`].
    pub fn node_id(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// The location with its options taken from the standard variables:
    /// `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT`), `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` (or
    /// `AWS_DEFAULT_REGION`), `AWS_ALLOW_HTTP` (`true` for a plain-HTTP
    /// loopback server) and `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`. With an
    /// endpoint and no region the region is `us-east-1` (S3-compatible
    /// servers ignore it; the signature needs one).
    pub fn from_env(uri: &str) -> Result<Remote> {
        Remote::from_vars(uri, |name| std::env::var(name).ok())
    }

    fn from_vars(uri: &str, var: impl Fn(&str) -> Option<String>) -> Result<Remote> {
        let mut remote = Remote::new(uri)?;
        let first = |names: &[&str]| names.iter().find_map(|n| var(n).filter(|v| !v.is_empty()));
        let keys: [(&str, &[&str]); 6] = [
            ("aws_endpoint", &["AWS_ENDPOINT_URL", "AWS_ENDPOINT"]),
            ("aws_access_key_id", &["AWS_ACCESS_KEY_ID"]),
            ("aws_secret_access_key", &["AWS_SECRET_ACCESS_KEY"]),
            ("aws_session_token", &["AWS_SESSION_TOKEN"]),
            ("aws_region", &["AWS_REGION", "AWS_DEFAULT_REGION"]),
            ("aws_allow_http", &["AWS_ALLOW_HTTP"]),
        ];
        for (key, names) in keys {
            if let Some(value) = first(names) {
                remote = remote.option(key, value);
            }
        }
        if let Some(value) = first(&["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"]) {
            remote = remote.option("aws_virtual_hosted_style_request", value);
        }
        if remote.get("aws_endpoint").is_some() && remote.get("aws_region").is_none() {
            remote = remote.option("aws_region", "us-east-1");
        }
        Ok(remote)
    }

    /// Sets one option (a later value for the same key wins).
    pub fn option(mut self, key: impl Into<String>, value: impl Into<String>) -> Remote {
        let key = key.into();
        self.options.retain(|(k, _)| *k != key);
        self.options.push((key, value.into()));
        self
    }

    /// How long the writer's lease lasts unless renewed (default
    /// [`DEFAULT_LEASE_TTL`]; renewed every quarter of it). A writer that
    /// crashed holds the store for up to 1.2 × this; one paused for longer
    /// than 0.8 × this has its writes refused when it wakes.
    pub fn lease_ttl(mut self, ttl: Duration) -> Remote {
        self.lease_ttl = ttl.max(Duration::from_millis(100));
        self
    }

    /// How long an open waits for another process's lease to expire before
    /// it fails with [`crate::IndexerError::LeaseHeld`]. Default 1.5 × the
    /// lease's ttl: long enough to take over from a writer that crashed.
    pub fn lease_wait(mut self, wait: Duration) -> Remote {
        self.lease_wait = Some(wait);
        self
    }

    /// The lease's ttl and the open's wait for it.
    pub(crate) fn lease(&self) -> (Duration, Duration) {
        let wait = self.lease_wait.unwrap_or(self.lease_ttl.mul_f64(1.5));
        (self.lease_ttl, wait)
    }

    /// The option set for `key`, if any.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `s3://bucket/prefix`, without a trailing `/`.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The bucket's name.
    pub fn bucket(&self) -> &str {
        let rest = &self.uri[SCHEME.len()..];
        rest.split('/').next().unwrap_or(rest)
    }

    /// The key prefix inside the bucket (empty for the bucket's root).
    pub fn prefix(&self) -> &str {
        let rest = &self.uri[SCHEME.len()..];
        rest.split_once('/').map_or("", |(_, prefix)| prefix)
    }

    /// Every option, in the order set.
    pub fn options(&self) -> &[(String, String)] {
        &self.options
    }

    /// Where the LanceDB tables live.
    pub(crate) fn tables_uri(&self) -> String {
        format!("{}/tables", self.uri)
    }
}

/// Secrets stay out of logs and error messages.
impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<(&str, &str)> = self
            .options
            .iter()
            .map(|(k, v)| {
                let secret = k.contains("secret") || k.contains("token");
                (k.as_str(), if secret { "<hidden>" } else { v.as_str() })
            })
            .collect();
        f.debug_struct("Remote")
            .field("uri", &self.uri)
            .field("options", &shown)
            .field("lease_ttl", &self.lease_ttl)
            .field("node", &self.node)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_is_an_s3_bucket_with_an_optional_prefix() {
        let remote = Remote::new("s3://b/p/q/").unwrap();
        assert_eq!(
            (remote.uri(), remote.bucket(), remote.prefix()),
            ("s3://b/p/q", "b", "p/q")
        );
        assert_eq!(remote.tables_uri(), "s3://b/p/q/tables");
        let root = Remote::new("s3://b").unwrap();
        assert_eq!((root.bucket(), root.prefix()), ("b", ""));
        for bad in [
            "./data",
            "s3://",
            "s3:///p",
            "s3://b//p",
            "s3://b/../p",
            "gs://b/p",
        ] {
            assert!(
                matches!(Remote::new(bad), Err(IndexerError::InvalidRemote { .. })),
                "{bad} is refused"
            );
        }
    }

    #[test]
    fn options_come_from_the_standard_variables_and_secrets_are_not_printed() {
        let vars = [
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
            ("AWS_ACCESS_KEY_ID", "id"),
            ("AWS_SECRET_ACCESS_KEY", "very-secret"),
            ("AWS_ALLOW_HTTP", "true"),
        ];
        let remote = Remote::from_vars("s3://b/p", |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
        assert_eq!(remote.get("aws_endpoint"), Some("http://127.0.0.1:9"));
        assert_eq!(remote.get("aws_allow_http"), Some("true"));
        assert_eq!(
            remote.get("aws_region"),
            Some("us-east-1"),
            "defaulted beside an endpoint"
        );
        let printed = format!("{remote:?}");
        assert!(
            !printed.contains("very-secret") && printed.contains("<hidden>"),
            "{printed}"
        );
        let none = Remote::from_vars("s3://b", |_| None).unwrap();
        assert!(none.options().is_empty(), "no endpoint, no default region");
    }
}

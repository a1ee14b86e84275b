//! Which node a tenant is placed on: rendezvous (highest random weight)
//! hashing over the live nodes. Every node computes the same answer from
//! the same membership, and when a node joins or leaves only the tenants
//! it gains or held move (about 1/n of them), not a reshuffle.

use recall::Member;
use sha2::{Digest, Sha256};

/// The node `tenant` is placed on among `nodes`; `None` when there are none.
pub fn owner<'a>(tenant: &str, nodes: &'a [Member]) -> Option<&'a Member> {
    nodes
        .iter()
        .max_by_key(|member| (weight(&member.node, tenant), member.node.as_str()))
}

/// A node's weight for a tenant: the first 8 bytes of SHA-256 over both
/// (a separator keeps `("ab", "c")` apart from `("a", "bc")`). A fixed hash,
/// so processes of different builds agree.
fn weight(node: &str, tenant: &str) -> u64 {
    let mut hash = Sha256::new();
    hash.update(node.as_bytes());
    hash.update([0]);
    hash.update(tenant.as_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The path segment of a tenant's store and cache: letters, digits, `.`
/// and `-` as they are, every other byte as `_` and two hex digits. Tenant
/// names may hold `/`, `:` and `@` (§9), which must not nest one tenant's
/// store inside another's (`a` and `a/tables`); the escape is one-to-one.
pub fn segment(tenant: &str) -> String {
    let mut out = String::with_capacity(tenant.len());
    for byte in tenant.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'.' || byte == b'-' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("_{byte:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn nodes(ids: &[&str]) -> Vec<Member> {
        ids.iter()
            .map(|id| Member {
                node: id.to_string(),
                addr: format!("{id}:1"),
            })
            .collect()
    }

    fn placed(tenants: &[String], nodes: &[Member]) -> HashMap<String, String> {
        tenants
            .iter()
            .map(|t| {
                (
                    t.clone(),
                    owner(t, nodes).map(|m| m.node.clone()).unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Spread: 3,000 tenants over three nodes land within 10% of a third
    /// each; the order nodes are listed in does not matter.
    #[test]
    fn tenants_spread_evenly_and_every_node_agrees() {
        let tenants: Vec<String> = (0..3000).map(|i| format!("tenant-{i}")).collect();
        let three = nodes(&["n1", "n2", "n3"]);
        let reversed = nodes(&["n3", "n2", "n1"]);
        let a = placed(&tenants, &three);
        assert_eq!(a, placed(&tenants, &reversed));
        for node in ["n1", "n2", "n3"] {
            let share = a.values().filter(|n| *n == node).count();
            assert!((900..=1100).contains(&share), "{node} holds {share}");
        }
        assert!(owner("t", &[]).is_none());
    }

    /// Stability: when a node leaves, only its tenants move; when one
    /// joins, only tenants that go to it move.
    #[test]
    fn a_change_of_nodes_moves_only_the_tenants_it_must() {
        let tenants: Vec<String> = (0..2000).map(|i| format!("t{i}")).collect();
        let before = placed(&tenants, &nodes(&["n1", "n2", "n3"]));
        let without = placed(&tenants, &nodes(&["n1", "n3"]));
        for t in &tenants {
            if before[t] != "n2" {
                assert_eq!(before[t], without[t], "{t} moved though its node stayed");
            }
        }
        let with = placed(&tenants, &nodes(&["n1", "n2", "n3", "n4"]));
        let moved = tenants.iter().filter(|t| before[*t] != with[*t]).count();
        for t in &tenants {
            if before[t] != with[t] {
                assert_eq!(with[t], "n4");
            }
        }
        assert!(
            (400..=600).contains(&moved),
            "{moved} of 2000 moved to the new node"
        );
    }

    #[test]
    fn segments_keep_tenants_apart() {
        assert_eq!(segment("acme"), "acme");
        assert_eq!(segment("acme/eu"), "acme_2feu");
        assert_eq!(segment("a_b"), "a_5fb");
        assert_ne!(segment("a/tables"), format!("{}/tables", segment("a")));
        assert_ne!(segment("a_2fb"), segment("a/b"));
    }
}

//! Input checks of §3.1: every write and read is checked before anything runs.

use crate::error::{Error, Result};

/// Checks a tenant, bank or session name: `[A-Za-z0-9._:@/-]{1,128}`, no
/// `..` segment, no leading `/` (nothing path-like may reach the storage
/// layer). Every call of the engine checks its names this way; a front end
/// (the MCP server) checks its configuration with it before serving.
///
/// ```
/// assert!(recall::validate_scope_name("tenant", "acme").is_ok());
/// assert!(recall::validate_scope_name("tenant", "../etc").is_err());
/// ```
pub fn scope_name(field: &'static str, value: &str) -> Result<()> {
    if value.is_empty() || value.len() > 128 {
        return Err(Error::invalid(field, "must be 1 to 128 characters"));
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._:@/-".contains(*c)))
    {
        return Err(Error::invalid(
            field,
            format!("character {c:?} is not allowed"),
        ));
    }
    if value
        .split('/')
        .any(|segment| segment == ".." || segment == ".")
        || value.starts_with('/')
    {
        return Err(Error::invalid(
            field,
            format!("`{value}` looks like a path"),
        ));
    }
    Ok(())
}

/// Content: non-empty after trimming, at most `max` bytes.
pub(crate) fn content(value: &str, max: usize) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::invalid("content", "must not be empty"));
    }
    if value.len() > max {
        return Err(Error::ContentTooLong {
            len: value.len(),
            max,
        });
    }
    Ok(())
}

/// Confidence in (0, 1].
pub(crate) fn confidence(value: f32) -> Result<()> {
    if !(value > 0.0 && value <= 1.0) {
        return Err(Error::invalid(
            "confidence",
            format!("{value} is outside (0, 1]"),
        ));
    }
    Ok(())
}

/// Titles and elements: non-empty, at most 256 bytes, one line.
pub(crate) fn label(field: &'static str, value: &str) -> Result<()> {
    if value.trim().is_empty() || value.len() > 256 || value.contains('\n') {
        return Err(Error::invalid(
            field,
            "must be one non-empty line of at most 256 bytes",
        ));
    }
    Ok(())
}

/// A hash of [`normalized_text`]: what the in-memory state keeps of each
/// memory's folded text (8 bytes, not a second copy of its content); a
/// match is confirmed on the text itself.
pub(crate) fn folded_hash(folded: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    // Fixed keys: equal texts hash equal across the process.
    let mut hasher = std::hash::DefaultHasher::new();
    folded.hash(&mut hasher);
    hasher.finish()
}

/// Text folded for dedup without vectors: lowercase, punctuation dropped,
/// whitespace collapsed.
pub(crate) fn normalized_text(text: &str) -> String {
    // One pass and one allocation: every write folds its text.
    let mut folded = String::with_capacity(text.len());
    let mut gap = false;
    for c in text.chars() {
        // ASCII first, without the Unicode tables: most memories are
        // ASCII, and an open folds every one (about 7 % of a 1M open's
        // CPU went to the tables' lookups and lowercasing). The same
        // classes as below: `char::is_whitespace` of ASCII is tab through
        // carriage return and space.
        if c.is_ascii() {
            if c.is_ascii_alphanumeric() {
                if gap {
                    folded.push(' ');
                    gap = false;
                }
                folded.push(c.to_ascii_lowercase());
            } else if matches!(c, '\t'..='\r' | ' ') {
                gap = !folded.is_empty();
            }
            continue;
        }
        if c.is_whitespace() {
            gap = !folded.is_empty();
        } else if c.is_alphanumeric() {
            if gap {
                folded.push(' ');
                gap = false;
            }
            folded.extend(c.to_lowercase());
        }
    }
    folded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_names() {
        for ok in ["acme", "user:alice", "repo:api/v2", "a.b-c@d"] {
            assert!(scope_name("tenant", ok).is_ok(), "{ok}");
        }
        for bad in ["", "../x", "a/../b", "/etc", "a b", "x\0", &"a".repeat(129)] {
            assert!(scope_name("tenant", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn confidence_range() {
        assert!(confidence(1.0).is_ok());
        assert!(confidence(0.01).is_ok());
        for bad in [0.0, 1.5, -1.0, f32::NAN] {
            assert!(confidence(bad).is_err());
        }
    }

    #[test]
    fn text_folding() {
        assert_eq!(normalized_text("  Hello,   WORLD! "), "hello world");
        assert_eq!(
            normalized_text("Rate-limit , the\tAPI.\n"),
            "ratelimit the api"
        );
        assert_eq!(normalized_text(" ,; "), "");
        assert_eq!(normalized_text("Straße ÉTÉ"), "straße été");
        // The ASCII path folds as the definition reads (words between
        // whitespace, each without its other characters, lowercased;
        // empty ones dropped): every ASCII character, alone and between
        // words, and text mixing it with other characters.
        let reference = |text: &str| {
            text.split(char::is_whitespace)
                .map(|w| {
                    w.chars()
                        .filter(|c| c.is_alphanumeric())
                        .flat_map(char::to_lowercase)
                        .collect::<String>()
                })
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        };
        for b in 0u8..128 {
            let c = char::from(b);
            for text in [
                format!("a{c}B"),
                format!("{c}x{c}{c}Y{c}"),
                format!("Ö{c}é\u{2003}{c}Z"),
            ] {
                assert_eq!(normalized_text(&text), reference(&text), "{text:?}");
            }
        }
    }
}

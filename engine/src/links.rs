//! `[[Title]]` links between memories (§3.7, §4.7).
//!
//! Links are parsed from the content and resolved by title at read time, so a
//! link to a title not written yet is pending and resolves by itself once a
//! memory with that title (or one renamed into it by supersession) exists.

/// The distinct titles referenced as `[[Title]]` in `content`, in order.
///
/// ```
/// let links = recall::parse_links("See [[Gateway limits]] and [[Auth]]; again [[Auth]].");
/// assert_eq!(links, vec!["Gateway limits".to_string(), "Auth".to_string()]);
/// ```
pub fn parse_links(content: &str) -> Vec<String> {
    let mut links: Vec<String> = Vec::new();
    let mut rest = content;
    while let Some(start) = rest.find("[[") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("]]") else {
            break;
        };
        let title = after[..end].trim();
        if !title.is_empty() && !title.contains('\n') && !links.iter().any(|l| l == title) {
            links.push(title.to_string());
        }
        rest = &after[end + 2..];
    }
    links
}

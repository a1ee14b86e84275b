//! Redaction (§7): secrets and personal data are replaced by typed placeholders before anything is stored or embedded.
//!
//! A memory is written once and then read, embedded, indexed and shown to
//! later sessions many times, so a credential pasted into it would leak
//! everywhere. The [`Redactor`] runs first on the write path and replaces each
//! match with a placeholder such as `[EMAIL]`; only the counts per kind are
//! kept, never the values.
//!
//! The rules favour precision on ordinary engineering text (versions, hashes,
//! ids, dates, addresses of services) over catching every possible secret: a
//! redactor that mangles `tokio 1.48.0` or a git SHA would make memories
//! useless, while the formats of real credentials are distinctive enough to
//! be found without guessing.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::LazyLock;

use regex::{Captures, Regex, RegexSet};
use serde::{Deserialize, Serialize};

/// What a redactor did to one text: the text with placeholders, and how many of each kind it replaced (never the values).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Redaction {
    /// The text with every match replaced by its placeholder, e.g. `[EMAIL]`.
    pub text: String,
    /// Placeholder name (without brackets, e.g. "EMAIL") → how many were replaced. Empty when nothing was.
    pub counts: BTreeMap<String, u32>,
}

impl Redaction {
    /// True when anything was replaced.
    pub fn is_redacted(&self) -> bool {
        !self.counts.is_empty()
    }
}

/// Replaces secrets and personal data in text. Implement it to add rules or to plug in a different detector; the engine calls it on the title and the content of every memory before validation of length, embedding and storage.
///
/// ```
/// use recall::{DefaultRedactor, Redactor};
///
/// let out = DefaultRedactor.redact("Ask ops@example.com; staging uses password=hunter2");
/// assert_eq!(out.text, "Ask [EMAIL]; staging uses password=[SECRET]");
/// assert_eq!(out.counts["EMAIL"], 1);
/// assert_eq!(out.counts["SECRET"], 1);
/// assert!(out.is_redacted());
///
/// // Ordinary engineering text is left alone.
/// let clean = DefaultRedactor.redact("Bumped tokio to 1.48.0 in commit 3f9c2ab");
/// assert!(!clean.is_redacted());
/// ```
pub trait Redactor: Send + Sync + std::fmt::Debug {
    /// The text with secrets replaced, and what was replaced.
    fn redact(&self, text: &str) -> Redaction;
}

/// The default rule set (on unless configured off), applied in this order so
/// that the most specific format claims a span first and nothing is counted
/// twice:
///
/// 1. `[PRIVATE_KEY]`: whole PEM private key blocks (`-----BEGIN … PRIVATE KEY-----`
///    through the matching `END` line; a block cut off before its `END` line is
///    redacted up to the end of its body).
/// 2. `[JWT]`: three base64url segments, the first starting `eyJ`.
/// 3. `[TOKEN]`: prefixed API tokens: GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`,
///    `ghr_`, `github_pat_`), GitLab (`glpat-`), Slack (`xoxb-`, `xoxp-`, `xoxa-`,
///    `xapp-`, …), OpenAI/Anthropic style `sk-…`, Stripe `sk_live_`/`rk_live_`,
///    Google `AIza…`, npm `npm_`, Hugging Face `hf_`, SendGrid `SG.…`; the secret
///    path of Slack and Discord webhook URLs; the credential after `Bearer`.
/// 4. `[AWS_KEY]`: AWS access key ids (`AKIA…`, `ASIA…` and the other
///    documented prefixes, 20 characters).
/// 5. `[SECRET]`: the password of URL credentials (`scheme://user:[SECRET]@host`),
///    `Authorization: Basic` credentials, 40-character AWS secret access keys
///    next to a "secret key" label, and the value of assignments to
///    password/secret/api key/token-like keys (`password=[SECRET]`,
///    `"client_secret": "[SECRET]"`, `DB_PASSWORD=[SECRET]`, `--token [SECRET]`,
///    "the password is \[SECRET\]"). The key is kept; references such as
///    `${DB_PASSWORD}` or `os.environ[...]` are not values and are kept too.
/// 6. `[EMAIL]`: e-mail addresses.
/// 7. `[CARD]`: Luhn-valid payment card numbers of 13–19 digits with a
///    plausible issuer prefix, plain or grouped by single spaces or dashes.
/// 8. `[PHONE]`: international numbers written with `+` and a country code,
///    and North American numbers written in groups (`(415) 555-0132`,
///    `415-555-0132`, `1-800-555-0199`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRedactor;

impl Redactor for DefaultRedactor {
    fn redact(&self, text: &str) -> Redaction {
        redact_with_default_rules(text)
    }
}

const EMAIL: &str = "EMAIL";
const PHONE: &str = "PHONE";
const CARD: &str = "CARD";
const AWS_KEY: &str = "AWS_KEY";
const SECRET: &str = "SECRET";
const TOKEN: &str = "TOKEN";
const JWT: &str = "JWT";
const PRIVATE_KEY: &str = "PRIVATE_KEY";

const PLACEHOLDERS: [&str; 8] = [EMAIL, PHONE, CARD, AWS_KEY, SECRET, TOKEN, JWT, PRIVATE_KEY];

/// Decides whether a regex match is a real finding and which byte range of the
/// (current) text to replace; `None` rejects the match.
type Accept = fn(&Captures<'_>, &str) -> Option<Range<usize>>;

enum Detector {
    Pattern(&'static str, Accept),
    /// Cards need a Luhn check over windows of digit groups, which a regex
    /// cannot express.
    Cards,
}

struct Spec {
    kind: &'static str,
    detector: Detector,
}

/// The rules in the order they are applied (see [`DefaultRedactor`]).
const SPECS: &[Spec] = &[
    Spec {
        kind: PRIVATE_KEY,
        detector: Detector::Pattern(
            // The fallback alternative catches a block pasted without its END
            // line: over-redacting the tail is better than leaking the body.
            r"(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s\\:,.-]*)",
            whole,
        ),
    },
    Spec {
        kind: JWT,
        detector: Detector::Pattern(
            r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*",
            whole,
        ),
    },
    Spec {
        kind: TOKEN,
        detector: Detector::Pattern(
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255}|glpat-[A-Za-z0-9_-]{20,}|(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|AIza[A-Za-z0-9_-]{35}|npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})",
            random_token,
        ),
    },
    Spec {
        kind: TOKEN,
        detector: Detector::Pattern(
            // Keep the host so the memory still says which service it was.
            r"(?i)(https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)/|(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/))([A-Za-z0-9_/-]+)",
            last_group,
        ),
    },
    Spec {
        kind: TOKEN,
        detector: Detector::Pattern(r"(?i)\b(bearer[ \t]+)([A-Za-z0-9._~+/-]{8,}=*)", bearer),
    },
    Spec {
        kind: AWS_KEY,
        detector: Detector::Pattern(
            r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA)[A-Z0-9]{16}\b",
            whole,
        ),
    },
    Spec {
        kind: SECRET,
        detector: Detector::Pattern(
            r"\b([A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/?#@\[\]]*:)([^\s/?#@\[\]]+)@",
            url_password,
        ),
    },
    Spec {
        kind: SECRET,
        detector: Detector::Pattern(
            r"(?i)\b(authorization:[ \t]*basic[ \t]+)([A-Za-z0-9+/]{8,}={0,2})",
            last_group,
        ),
    },
    Spec {
        kind: SECRET,
        detector: Detector::Pattern(
            // A bare 40-character base64 string is too ambiguous on its own;
            // next to a "secret key" label it is an AWS secret access key.
            r"(?i)\b(?:aws[ _-]?secret(?:[ _-]?access)?(?:[ _-]?key)?|secret[ _-]?access[ _-]?key|secret[ _-]?key)\b[^\n]{0,40}?([A-Za-z0-9/+]{40})",
            aws_secret,
        ),
    },
    Spec {
        kind: SECRET,
        detector: Detector::Pattern(
            // Groups: 1 key, 2 separator, 3 "value", 4 'value', 5 bare value.
            // The key must end with the keyword so that `password_min_length`
            // or `max_tokens` are not taken for credentials.
            r#"(?i)\b((?:[a-z0-9_.-]*?(?:password|passwd|passphrase|secret|api[_-]?key|apikey|api[_-]?token|(?:access|secret|private|signing|encryption|master|client|auth)[_-]?key|token)|(?:[a-z0-9_.-]*[_.-])?(?:pass|pwd)))["']?[ \t]*(=>|:=|=|:)[ \t]*(?:"([^"\r\n]*)"|'([^'\r\n]*)'|([^\s"'`,;&<>{}=()\[\]$][^\s"'`,;&<>{}]*))"#,
            assignment,
        ),
    },
    Spec {
        kind: SECRET,
        detector: Detector::Pattern(
            r#"(?i)(?:^|\s)--(?:[a-z0-9]+-)*(?:password|passwd|pass|token|secret|api-key|apikey)[ \t]+(?:"([^"\r\n]*)"|'([^'\r\n]*)'|([^\s"'`$-][^\s"'`]*))"#,
            cli_flag,
        ),
    },
    Spec {
        kind: SECRET,
        detector: Detector::Pattern(
            r#"(?i)\b(?:password|passphrase|passwd)[ \t]+(?:(?:is|was|has[ \t]+been)[ \t]+(?:set|changed|reset)[ \t]+to|(?:set|changed|reset)[ \t]+to|is|was)[ \t]+["'“]?([^\s"'”`]+)"#,
            prose_password,
        ),
    },
    Spec {
        kind: EMAIL,
        detector: Detector::Pattern(
            // No leading `\b`: local parts may start with a non-ASCII letter, and the
            // leftmost match already starts where the address does.
            r"[\p{L}\p{N}][\p{L}\p{N}._%+'-]*@[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?(?:\.[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?)*\.\p{L}{2,24}",
            email,
        ),
    },
    Spec {
        kind: CARD,
        detector: Detector::Cards,
    },
    Spec {
        kind: PHONE,
        detector: Detector::Pattern(
            r"\+[0-9]{1,3}(?:[ .-]?\([0-9]{1,4}\))?(?:[ .-]?[0-9]{1,6}){1,6}",
            international_phone,
        ),
    },
    Spec {
        kind: PHONE,
        detector: Detector::Pattern(
            r"(?:\b1[ .-]?)?(?:\([2-9][0-9]{2}\)[ .-]?|\b[2-9][0-9]{2}[ .-])[2-9][0-9]{2}[ .-][0-9]{4}\b",
            north_american_phone,
        ),
    },
];

struct Rule {
    kind: &'static str,
    detector: CompiledDetector,
}

enum CompiledDetector {
    /// `set_index` is the pattern's position in [`Rules::prefilter`].
    Pattern {
        regex: Regex,
        accept: Accept,
        set_index: usize,
    },
    Cards,
}

struct Rules {
    rules: Vec<Rule>,
    /// One pass over the text tells which patterns can match at all, so a
    /// clean text (the usual case) costs one scan instead of one per rule.
    prefilter: RegexSet,
}

/// Unicode `\b` makes the regex engines fall back to slower paths on
/// non-ASCII text; every boundary in these patterns is between ASCII
/// characters anyway. (No pattern contains an escaped backslash before a
/// `b`, which this textual rewrite would break.)
fn ascii_boundaries(pattern: &str) -> String {
    pattern.replace(r"\b", r"(?-u:\b)")
}

static RULES: LazyLock<Rules> = LazyLock::new(|| {
    let mut rules = Vec::with_capacity(SPECS.len());
    let mut patterns = Vec::new();
    for spec in SPECS {
        let detector = match &spec.detector {
            Detector::Pattern(pattern, accept) => {
                let pattern = ascii_boundaries(pattern);
                let regex = Regex::new(&pattern).expect("redaction patterns are constants");
                patterns.push(pattern);
                CompiledDetector::Pattern {
                    regex,
                    accept: *accept,
                    set_index: patterns.len() - 1,
                }
            }
            Detector::Cards => CompiledDetector::Cards,
        };
        rules.push(Rule {
            kind: spec.kind,
            detector,
        });
    }
    let prefilter = RegexSet::new(&patterns).expect("redaction patterns are constants");
    Rules { rules, prefilter }
});

/// Runs of digits separated by single spaces or dashes: the candidates for
/// card numbers, split into groups afterwards.
static DIGIT_RUN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[0-9](?:[ -]?[0-9])*").expect("redaction pattern is a constant"));

fn redact_with_default_rules(text: &str) -> Redaction {
    let rules = &*RULES;
    let candidates = rules.prefilter.matches(text);
    let may_hold_card = text.bytes().filter(u8::is_ascii_digit).count() >= 13;
    if !candidates.matched_any() && !may_hold_card {
        return Redaction {
            text: text.to_owned(),
            counts: BTreeMap::new(),
        };
    }

    let mut current: Cow<'_, str> = Cow::Borrowed(text);
    let mut counts = BTreeMap::new();
    let mut spans = Vec::new();
    for rule in &rules.rules {
        spans.clear();
        match &rule.detector {
            CompiledDetector::Pattern {
                regex,
                accept,
                set_index,
            } => {
                // Earlier rules only swap matches for bracketed placeholders,
                // which no later pattern accepts, so a pattern that found
                // nothing in the input finds nothing in the output either
                // (the idempotence test checks this on every fixture).
                if !candidates.matched(*set_index) {
                    continue;
                }
                spans.extend(
                    regex
                        .captures_iter(&current)
                        .filter_map(|caps| accept(&caps, &current)),
                );
            }
            CompiledDetector::Cards => {
                if !may_hold_card {
                    continue;
                }
                find_cards(&current, &mut spans);
            }
        }
        if spans.is_empty() {
            continue;
        }
        current = Cow::Owned(replace_spans(&current, &spans, rule.kind));
        let found = u32::try_from(spans.len()).unwrap_or(u32::MAX);
        let count = counts.entry(rule.kind.to_owned()).or_insert(0u32);
        *count = count.saturating_add(found);
    }
    Redaction {
        text: current.into_owned(),
        counts,
    }
}

/// `spans` are sorted and disjoint: they come from successive,
/// non-overlapping matches and each lies inside its match.
fn replace_spans(text: &str, spans: &[Range<usize>], kind: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for span in spans {
        out.push_str(&text[last..span.start]);
        out.push('[');
        out.push_str(kind);
        out.push(']');
        last = span.end;
    }
    out.push_str(&text[last..]);
    out
}

// ---------------------------------------------------------------------------
// Acceptors

fn whole(caps: &Captures<'_>, _: &str) -> Option<Range<usize>> {
    caps.get(0).map(|m| m.range())
}

/// The last capture group that took part in the match: rules that keep a
/// prefix (a key, a scheme, `Bearer `) capture the secret last.
fn last_group(caps: &Captures<'_>, _: &str) -> Option<Range<usize>> {
    caps.iter()
        .skip(1)
        .flatten()
        .last()
        .or_else(|| caps.get(0))
        .map(|m| m.range())
}

/// Real tokens are random: a prefix followed by only letters (or only
/// digits) is far more likely an identifier such as `sk-learn-…`.
fn random_token(caps: &Captures<'_>, _: &str) -> Option<Range<usize>> {
    let m = caps.get(0)?;
    has_letter_and_digit(m.as_str()).then(|| m.range())
}

fn bearer(caps: &Captures<'_>, _: &str) -> Option<Range<usize>> {
    let token = caps.get(2)?;
    // "bearer authentication" in prose has no digit; real tokens do.
    has_letter_and_digit(token.as_str()).then(|| token.range())
}

fn url_password(caps: &Captures<'_>, _: &str) -> Option<Range<usize>> {
    let password = caps.get(2)?;
    is_value(password.as_str()).then(|| password.range())
}

fn aws_secret(caps: &Captures<'_>, text: &str) -> Option<Range<usize>> {
    let key = caps.get(1)?;
    let base64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '/' | '+' | '=');
    if prev_char(text, key.start()).is_some_and(base64)
        || next_char(text, key.end()).is_some_and(base64)
    {
        return None;
    }
    let value = key.as_str();
    let upper = value.bytes().any(|b| b.is_ascii_uppercase());
    let lower = value.bytes().any(|b| b.is_ascii_lowercase());
    let other = value.bytes().any(|b| !b.is_ascii_alphabetic());
    (upper && lower && other).then(|| key.range())
}

fn assignment(caps: &Captures<'_>, text: &str) -> Option<Range<usize>> {
    let key = caps.get(1)?.as_str();
    let separator = caps.get(2)?.as_str();
    if let Some(quoted) = caps.get(3).or_else(|| caps.get(4)) {
        // Quotes mark a literal, so any real-looking value counts.
        return is_value(quoted.as_str()).then(|| quoted.range());
    }
    let bare = caps.get(5)?;
    let range = trim_bare_value(text, bare.range());
    let value = &text[range.clone()];
    if !is_value(value) || looks_like_code(value, key) {
        return None;
    }
    // `key: value` is also how prose and type annotations are written
    // ("token: expires hourly", `password: String`), so the value must look
    // like a secret rather than a word.
    if separator == ":" && !looks_secret(value) {
        return None;
    }
    Some(range)
}

fn cli_flag(caps: &Captures<'_>, text: &str) -> Option<Range<usize>> {
    if let Some(quoted) = caps.get(1).or_else(|| caps.get(2)) {
        return is_value(quoted.as_str()).then(|| quoted.range());
    }
    let bare = caps.get(3)?;
    let range = trim_bare_value(text, bare.range());
    is_value(&text[range.clone()]).then_some(range)
}

/// "The password is stored in Vault" must survive, so only a value that has
/// the shape of a password (letters with digits or symbols) is taken.
fn prose_password(caps: &Captures<'_>, text: &str) -> Option<Range<usize>> {
    let bare = caps.get(1)?;
    let range = trim_bare_value(text, bare.range());
    let value = &text[range.clone()];
    let letter = value.chars().any(char::is_alphabetic);
    let digit_or_symbol = value.chars().any(|c| !c.is_alphabetic());
    (value.chars().count() >= 6 && letter && digit_or_symbol && is_value(value)).then_some(range)
}

fn email(caps: &Captures<'_>, _: &str) -> Option<Range<usize>> {
    let m = caps.get(0)?;
    let address = m.as_str();
    let (local, domain) = address.split_once('@')?;
    // `git@github.com:org/repo` is an SSH remote, not a person.
    if local.eq_ignore_ascii_case("git") {
        return None;
    }
    // `icon@2x.png`: retina asset names end in a file extension, not a TLD.
    let tld = domain.rsplit('.').next().unwrap_or_default();
    const FILE_EXTENSIONS: &[&str] = &[
        "png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "avif", "pdf", "js", "mjs", "ts",
        "tsx", "jsx", "css", "scss", "html", "json", "yaml", "yml", "toml", "lock", "md", "txt",
        "py", "rb", "go", "java", "kt", "swift", "zip", "gz", "tar", "wasm",
    ];
    if FILE_EXTENSIONS
        .iter()
        .any(|ext| tld.eq_ignore_ascii_case(ext))
    {
        return None;
    }
    Some(m.range())
}

fn international_phone(caps: &Captures<'_>, text: &str) -> Option<Range<usize>> {
    let m = caps.get(0)?;
    if prev_char(text, m.start()).is_some_and(|c| c.is_alphanumeric() || "_.+-/".contains(c)) {
        return None;
    }
    let mut end = m.end();
    // The pattern is greedy over digit groups, so "+44 20 7946 0958 2nd line"
    // would take the "2"; drop trailing groups glued to the following word.
    while continues_number(text, end) {
        let cut = text[m.start()..end].rfind([' ', '.', '-'])?;
        end = m.start() + cut;
    }
    let digits = text[m.start()..end]
        .bytes()
        .filter(u8::is_ascii_digit)
        .count();
    (8..=15).contains(&digits).then_some(m.start()..end)
}

fn north_american_phone(caps: &Captures<'_>, text: &str) -> Option<Range<usize>> {
    let m = caps.get(0)?;
    if prev_char(text, m.start()).is_some_and(|c| c.is_alphanumeric() || "_.+-/#".contains(c))
        || continues_number(text, m.end())
    {
        return None;
    }
    Some(m.range())
}

// ---------------------------------------------------------------------------
// Value heuristics

fn has_letter_and_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit()) && s.bytes().any(|b| b.is_ascii_alphabetic())
}

fn starts_with_placeholder(s: &str) -> bool {
    PLACEHOLDERS.iter().any(|kind| {
        s.strip_prefix('[')
            .and_then(|rest| rest.strip_prefix(kind))
            .is_some_and(|rest| rest.starts_with(']'))
    })
}

/// Whether an assigned value is a literal worth hiding, as opposed to an
/// empty/boolean setting, an earlier placeholder or a reference to where the
/// secret lives (`${DB_PASSWORD}`, `{{ .Values.token }}`, `<your-token>`).
fn is_value(value: &str) -> bool {
    let value = value.trim();
    if value.is_empty()
        || !value.chars().any(char::is_alphanumeric)
        || starts_with_placeholder(value)
        || value.starts_with(['$', '%', '<'])
        || value.starts_with("{{")
        || value.starts_with("#{")
    {
        return false;
    }
    const NOT_SECRETS: &[&str] = &[
        "null",
        "none",
        "nil",
        "true",
        "false",
        "undefined",
        "yes",
        "no",
        "on",
        "off",
        "empty",
        "redacted",
        "required",
        "optional",
    ];
    !NOT_SECRETS
        .iter()
        .any(|word| value.eq_ignore_ascii_case(word))
}

/// Bare values end at whitespace; strip what belongs to the sentence rather
/// than the value: an unmatched closing bracket and final punctuation.
fn trim_bare_value(text: &str, mut range: Range<usize>) -> Range<usize> {
    loop {
        let value = &text[range.clone()];
        let unmatched = |open: char, close: char| {
            value.ends_with(close) && value.matches(close).count() > value.matches(open).count()
        };
        if unmatched('(', ')') || unmatched('[', ']') {
            range.end -= 1;
            continue;
        }
        let ends_sentence = next_char(text, range.end).is_none_or(char::is_whitespace);
        // `!` and `?` stay: passwords end with them more often than sentences
        // that quote a password do.
        if ends_sentence && value.len() > 1 && value.ends_with(['.', ':']) {
            range.end -= 1;
        }
        return range;
    }
}

/// Code that reads the secret from somewhere else: `password=password`,
/// `token=os.environ["TOKEN"]`, `api_key=getenv("KEY")`, `secret=settings.SECRET_KEY`.
fn looks_like_code(value: &str, key: &str) -> bool {
    if value.eq_ignore_ascii_case(key) {
        return true;
    }
    let path_end = value
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(value.len());
    let (path, rest) = value.split_at(path_end);
    let segments: Vec<&str> = path.split('.').collect();
    let identifiers = segments.iter().all(|segment| {
        segment
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
    });
    if !identifiers {
        return false;
    }
    if rest.starts_with(['(', '[']) {
        return true;
    }
    if !rest.is_empty() || segments.len() < 2 {
        return false;
    }
    const OBJECTS: &[&str] = &[
        "os", "env", "process", "self", "this", "config", "settings", "args", "opts", "options",
        "cfg", "ctx", "params", "secrets", "vars", "props",
    ];
    const STEMS: &[&str] = &["pass", "pwd", "secret", "token", "key", "credential"];
    let first = segments[0].to_ascii_lowercase();
    let last = segments[segments.len() - 1].to_ascii_lowercase();
    OBJECTS.contains(&first.as_str()) || STEMS.iter().any(|stem| last.contains(stem))
}

/// After `key:` a plain word is prose or a type; a secret has a digit, a
/// symbol, inner capitals or length.
fn looks_secret(value: &str) -> bool {
    const TYPES: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "int32", "int64", "uint32", "uint64", "float64", "bytes", "str",
    ];
    if TYPES.iter().any(|t| value.eq_ignore_ascii_case(t)) {
        return false;
    }
    // Dates, times, durations and plain numbers ("password reset: 2024-05-01").
    if value
        .chars()
        .all(|c| c.is_ascii_digit() || "-/:.".contains(c))
    {
        return false;
    }
    // Resource names such as a Kubernetes `secret: recall-db-credentials`.
    if value.contains(['-', '_', '.'])
        && value
            .split(['-', '_', '.'])
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_lowercase()))
    {
        return false;
    }
    value.chars().count() >= 12
        || value.chars().any(|c| !c.is_alphabetic())
        || value.chars().skip(1).any(char::is_uppercase)
}

fn prev_char(text: &str, index: usize) -> Option<char> {
    text[..index].chars().next_back()
}

fn next_char(text: &str, index: usize) -> Option<char> {
    text[index..].chars().next()
}

/// Whether the text right after `index` continues a word or a number
/// (`…0132x`, `…0132-7`, `…0132.5`), which makes the match a fragment.
fn continues_number(text: &str, index: usize) -> bool {
    let mut rest = text[index..].chars();
    match rest.next() {
        Some(c) if c.is_alphanumeric() || c == '_' => true,
        Some('.' | '-' | '/' | ',') => rest.next().is_some_and(|c| c.is_ascii_digit()),
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// Cards

fn find_cards(text: &str, spans: &mut Vec<Range<usize>>) {
    for run in DIGIT_RUN.find_iter(text) {
        // A run glued to letters, dots or slashes is part of a hash, a
        // version, a path or a decimal, never a card written by a person.
        let glued_before = prev_char(text, run.start())
            .is_some_and(|c| c.is_alphanumeric() || "_.-/\\+@".contains(c));
        let mut after = text[run.end()..].chars();
        let glued_after = continues_number(text, run.end())
            || match after.next() {
                Some('@') => true,
                Some('-' | '_') => after.next().is_some_and(char::is_alphanumeric),
                _ => false,
            };
        if glued_before || glued_after {
            continue;
        }
        card_windows(text, run.range(), spans);
    }
}

/// Splits a digit run into groups and takes every window of consecutive
/// groups that forms a card number, longest first from each start.
fn card_windows(text: &str, run: Range<usize>, spans: &mut Vec<Range<usize>>) {
    let bytes = text.as_bytes();
    // (start, end) of each group and the separator that follows it.
    let mut groups: Vec<(usize, usize, u8)> = Vec::new();
    let mut start = run.start;
    for i in run.clone() {
        if !bytes[i].is_ascii_digit() {
            groups.push((start, i, bytes[i]));
            start = i + 1;
        }
    }
    groups.push((start, run.end, 0));

    let mut first = 0;
    while first < groups.len() {
        // A window inside a run may only be cut at spaces: "1234-4111-…"
        // dashes bind groups into one identifier.
        let cut_before = first == 0 || groups[first - 1].2 == b' ';
        let mut found = None;
        if cut_before {
            let mut digits = Vec::with_capacity(19);
            for last in first..groups.len() {
                let (g_start, g_end, _) = groups[last];
                digits.extend_from_slice(&bytes[g_start..g_end]);
                if digits.len() > 19 {
                    break;
                }
                let cut_after = last + 1 == groups.len() || groups[last].2 == b' ';
                if cut_after && is_card(&groups[first..=last], &digits) {
                    found = Some(last);
                }
            }
        }
        match found {
            Some(last) => {
                spans.push(groups[first].0..groups[last].1);
                first = last + 1;
            }
            None => first += 1,
        }
    }
}

fn is_card(groups: &[(usize, usize, u8)], digits: &[u8]) -> bool {
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    if groups.len() > 1 {
        // Printed cards are grouped 4-4-4-4, 4-6-5, 4-4-4-4-3 with one kind
        // of separator.
        let separator = groups[0].2;
        let len = |g: &(usize, usize, u8)| g.1 - g.0;
        if len(&groups[0]) != 4
            || groups[1..].iter().any(|g| !(3..=6).contains(&len(g)))
            || groups[..groups.len() - 1].iter().any(|g| g.2 != separator)
        {
            return false;
        }
    }
    plausible_issuer(digits) && luhn_valid(digits)
}

/// Millisecond timestamps and snowflake ids start with 1; issuers do not.
fn plausible_issuer(digits: &[u8]) -> bool {
    let n = digits.len();
    match digits.first() {
        Some(b'4') => matches!(n, 13 | 16 | 19),
        Some(b'3') => matches!(n, 14..=16 | 19),
        Some(b'2') => n == 16,
        Some(b'5' | b'6') => (16..=19).contains(&n),
        _ => false,
    }
}

/// The Luhn checksum over ASCII digits.
fn luhn_valid(digits: &[u8]) -> bool {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            let d = u32::from(d - b'0');
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRETS: &str = include_str!("../tests/fixtures/secrets.jsonl");
    const CLEAN: &str = include_str!("../tests/fixtures/clean.txt");

    #[derive(Deserialize)]
    struct Case {
        text: String,
        secrets: Vec<String>,
        kind: String,
    }

    fn redact(text: &str) -> Redaction {
        DefaultRedactor.redact(text)
    }

    fn cases() -> Vec<Case> {
        SECRETS
            .lines()
            .filter(|line| !line.trim().is_empty())
            .enumerate()
            .map(|(i, line)| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("secrets.jsonl line {}: {e}", i + 1))
            })
            .collect()
    }

    #[test]
    fn every_fixture_secret_is_removed_and_counted() {
        let cases = cases();
        assert!(cases.len() >= 60, "only {} secret fixtures", cases.len());
        let mut failures = Vec::new();
        for case in &cases {
            assert!(PLACEHOLDERS.contains(&case.kind.as_str()), "{}", case.kind);
            let out = redact(&case.text);
            for secret in &case.secrets {
                if out.text.contains(secret.as_str()) {
                    failures.push(format!(
                        "leaked {secret:?}\n  in:  {}\n  out: {}",
                        case.text, out.text
                    ));
                }
            }
            if !out.counts.contains_key(&case.kind) {
                failures.push(format!(
                    "no {} counted ({:?})\n  in:  {}\n  out: {}",
                    case.kind, out.counts, case.text, out.text
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn clean_fixture_lines_are_untouched() {
        let lines: Vec<&str> = CLEAN.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(lines.len() >= 60, "only {} clean fixtures", lines.len());
        let failures: Vec<String> = lines
            .iter()
            .filter_map(|line| {
                let out = redact(line);
                (out.text != *line || out.is_redacted())
                    .then(|| format!("{:?}\n  in:  {line}\n  out: {}", out.counts, out.text))
            })
            .collect();
        assert!(
            failures.is_empty(),
            "{} false redactions:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn redacting_twice_changes_nothing() {
        for case in cases() {
            let once = redact(&case.text);
            let twice = redact(&once.text);
            assert_eq!(twice.text, once.text);
            assert!(
                twice.counts.is_empty(),
                "{:?} in {}",
                twice.counts,
                once.text
            );
        }
    }

    #[test]
    fn luhn() {
        assert!(luhn_valid(b"4111111111111111"));
        assert!(luhn_valid(b"378282246310005"));
        assert!(luhn_valid(b"6011111111111117"));
        assert!(!luhn_valid(b"4111111111111112"));
        assert!(!luhn_valid(b"1732982400000"));
        assert!(!luhn_valid(b""));
        assert!(!luhn_valid(b"41x1"));
    }

    #[test]
    fn assignments_keep_the_key() {
        let cases = [
            ("password=hunter2", "password=[SECRET]"),
            ("DB_PASSWORD=s3cr3t!x", "DB_PASSWORD=[SECRET]"),
            (
                r#"{"client_secret": "abc def"}"#,
                r#"{"client_secret": "[SECRET]"}"#,
            ),
            ("apikey = 'k3y-value'", "apikey = '[SECRET]'"),
            ("export token=abc123.", "export token=[SECRET]."),
            (
                "login(user, password=password)",
                "login(user, password=password)",
            ),
            ("token=${GITHUB_TOKEN}", "token=${GITHUB_TOKEN}"),
            ("api_key=os.environ[\"KEY\"]", "api_key=os.environ[\"KEY\"]"),
            (
                "the `password: String` field",
                "the `password: String` field",
            ),
            ("psql --password Zx9!mQ2w", "psql --password [SECRET]"),
        ];
        for (input, expected) in cases {
            assert_eq!(redact(input).text, expected, "{input}");
        }
    }

    #[test]
    fn counts_per_placeholder() {
        let out = redact(
            "mail a@example.com and b@example.org, card 4111 1111 1111 1111, key AKIAIOSFODNN7EXAMPLE",
        );
        assert_eq!(
            out.text,
            "mail [EMAIL] and [EMAIL], card [CARD], key [AWS_KEY]"
        );
        let expected: BTreeMap<String, u32> = [("EMAIL", 2), ("CARD", 1), ("AWS_KEY", 1)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        assert_eq!(out.counts, expected);
    }

    #[test]
    fn nothing_to_redact() {
        let out = redact("plain text");
        assert_eq!(
            out,
            Redaction {
                text: "plain text".into(),
                counts: BTreeMap::new()
            }
        );
        assert!(!out.is_redacted());
        assert_eq!(redact(""), Redaction::default());
    }

    #[test]
    fn doc_example() {
        let out = redact("Ask ops@example.com; staging uses password=hunter2");
        assert_eq!(out.text, "Ask [EMAIL]; staging uses password=[SECRET]");
        assert!(!redact("Bumped tokio to 1.48.0 in commit 3f9c2ab").is_redacted());
    }

    #[test]
    fn url_credentials_keep_user_and_host() {
        assert_eq!(
            redact("postgres://user:pa55word@db:5432/app").text,
            "postgres://user:[SECRET]@db:5432/app"
        );
    }

    #[test]
    fn bearer_keeps_the_scheme() {
        assert_eq!(
            redact("Authorization: Bearer 9f8e7d6c5b4a39281706").text,
            "Authorization: Bearer [TOKEN]"
        );
        assert!(!redact("use bearer authentication everywhere").is_redacted());
    }

    #[test]
    fn cards_need_luhn_and_shape() {
        assert_eq!(redact("4111-1111-1111-1111").text, "[CARD]");
        assert_eq!(redact("amex 378282246310005.").text, "amex [CARD].");
        assert!(!redact("4111 1111 1111 1112").is_redacted());
        assert!(!redact("ts 1732982400000").is_redacted());
        assert!(!redact("id 12345678-1234-1234-1234-123456789012").is_redacted());
    }

    #[test]
    fn non_ascii_text_is_handled() {
        let out = redact("Zugang für Jürgen: jürgen.k@example.de, Tel. +49 30 901820 — danke");
        assert_eq!(out.text, "Zugang für Jürgen: [EMAIL], Tel. [PHONE] — danke");
    }
}

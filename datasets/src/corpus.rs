//! Seeded agent-memory corpora with known answers, for quality runs of the
//! whole write-and-recall path (`recall-bench corpus`).
//!
//! A corpus is what agents of a few tenants would write over a year:
//! engineering facts, pitfalls, conventions and notes about services (each
//! on its service's element, in the service's repo bank or the org bank)
//! and personal facts and preferences (in a user bank), from templates
//! with two wordings each. On top of the distinct facts it carries, in
//! controlled shares:
//!
//! - **exact repeats** of a fact, written later (the write path should
//!   deduplicate them into the original);
//! - **paraphrases**, the fact in its other wording (deduplicated, or
//!   stored with the original among its similar memories);
//! - **knowledge updates**, the fact with a new value written later (the
//!   update should rank above the value it replaced);
//! - **drifted elements**: services whose code changed after everything
//!   written about them (their memories should carry the VERIFY flag).
//!
//! Tenants draw their facts from the same pool with their own values, so a
//! question one tenant can answer is often answerable in another tenant
//! too, with a different answer: a leak would show. Queries name their
//! gold writes; a share of them asks about a fact the tenant never wrote
//! (the right answer is an abstention). Same config, same corpus.
//!
//! Texts only: a quality run embeds them with the model (cached by content
//! hash); [`Corpus::synthetic_vectors`] gives clustered vectors with the
//! same structure (repeats equal, paraphrases and updates near their
//! original) for runs at a scale the model cannot embed in time.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, TimeZone, Utc};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::synthetic::{near_copy, query_near, unit_vector};

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct CorpusConfig {
    /// Seed; same config, same corpus.
    pub seed: u64,
    /// Distinct facts over all tenants (repeats, paraphrases and updates
    /// come on top). Default 3,000.
    pub facts: usize,
    /// Tenants, each with an equal share of the facts. Default 3.
    pub tenants: usize,
    /// Share of the facts written again, word for word. Default 0.05.
    pub repeat_share: f64,
    /// Share of the facts written again in their other wording. Default 0.05.
    pub paraphrase_share: f64,
    /// Share of the facts (of the families that change) updated with a new
    /// value. Default 0.05.
    pub update_share: f64,
    /// Share of the services (per tenant) whose code drifts after the last
    /// write about them. Default 0.1.
    pub drift_share: f64,
    /// Share of the facts that are personal (the rest are engineering). Default 0.3.
    pub personal_share: f64,
    /// Queries over all tenants. Default 300.
    pub queries: usize,
    /// Share of the queries asking about a fact the tenant never wrote. Default 0.1.
    pub unanswerable_share: f64,
    /// Questions an agent asks before it changes part of a service ("what
    /// should I watch out for?"), over all tenants, on top of `queries`:
    /// their answers are the pitfalls and conventions about that part, the
    /// memories kind weights exist to put first. Default 60.
    pub task_queries: usize,
    /// Facts about each drifted service that the agent re-learns after the
    /// drift (a new value, written after it), asked about (group
    /// `relearned`: gold the new value, stale the drifted old one) on top of
    /// `queries`, per tenant at most as often as each group of fact
    /// questions. Default 4.
    pub relearned_per_drift: usize,
    /// When the year of writes starts. Default 2025-01-01.
    pub start: DateTime<Utc>,
    /// Days the writes span (queries are asked at the end). Default 365.
    pub days: i64,
}

impl Default for CorpusConfig {
    fn default() -> Self {
        CorpusConfig {
            seed: 42,
            facts: 3_000,
            tenants: 3,
            repeat_share: 0.05,
            paraphrase_share: 0.05,
            update_share: 0.05,
            drift_share: 0.1,
            personal_share: 0.3,
            queries: 300,
            unanswerable_share: 0.1,
            task_queries: 60,
            relearned_per_drift: 4,
            start: Utc
                .with_ymd_and_hms(2025, 1, 1, 0, 0, 0)
                .single()
                .unwrap_or(DateTime::UNIX_EPOCH),
            days: 365,
        }
    }
}

/// Why a write is in the corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The first statement of a fact.
    Original,
    /// The original's text again (key of the original).
    Repeat(String),
    /// The fact in its other wording (key of the original).
    Paraphrase(String),
    /// The fact with a new value (key of the original).
    Update(String),
}

/// One memory an agent writes.
#[derive(Debug, Clone, PartialEq)]
pub struct CorpusWrite {
    /// Unique in the corpus (`<tenant>/f<fact>/<role>`): what gold names.
    pub key: String,
    /// The tenant.
    pub tenant: String,
    /// The bank (`repo:<service>`, `org` or `user:me`).
    pub bank: String,
    /// Kind name (`fact`, `pitfall`, `convention`, `note`, `preference`).
    pub kind: &'static str,
    /// The text.
    pub content: String,
    /// The service it is about (engineering memories).
    pub element: Option<String>,
    /// When it was written (`observed_at`).
    pub at: DateTime<Utc>,
    /// Why it is here.
    pub role: Role,
}

/// The code behind a service changed.
#[derive(Debug, Clone, PartialEq)]
pub struct CorpusDrift {
    /// The tenant.
    pub tenant: String,
    /// The service.
    pub element: String,
    /// When (after every write about it).
    pub at: DateTime<Utc>,
}

/// A question with known answers.
#[derive(Debug, Clone, PartialEq)]
pub struct CorpusQuery {
    /// Unique in the corpus.
    pub id: String,
    /// The tenant asking.
    pub tenant: String,
    /// What is asked.
    pub text: String,
    /// `plain`, `repeated`, `paraphrased`, `updated`, `drifted`,
    /// `unanswerable`, `task` (what to watch out for before a change;
    /// gold: the current versions of the pitfalls and conventions about
    /// that part of the service), or `relearned` (a fact of a drifted
    /// service written again with a new value after the drift).
    pub group: &'static str,
    /// Keys of the writes that state the answer (empty: unanswerable).
    pub gold: Vec<String>,
    /// Keys of the writes an update replaced: they should rank below gold.
    pub stale: Vec<String>,
    /// The answer's element drifted: its memories should carry VERIFY.
    pub drifted: bool,
}

/// A generated corpus.
#[derive(Debug, Clone, PartialEq)]
pub struct Corpus {
    /// In time order.
    pub writes: Vec<CorpusWrite>,
    /// Element drifts, in time order.
    pub drifts: Vec<CorpusDrift>,
    /// The questions, asked at [`Corpus::asked_at`].
    pub queries: Vec<CorpusQuery>,
    /// When the questions are asked: the end of the span.
    pub asked_at: DateTime<Utc>,
}

/// How a family draws its values.
#[derive(Debug, Clone, Copy)]
enum Values {
    List(&'static [&'static str]),
    Number(u32, u32),
    ErrorCode,
}

/// One kind of fact: its two wordings, its update (if it changes) and its
/// question. `{S}` is the subject (a service, or a relation and a name),
/// `{T}` the thing within a service, `{V}` the value.
struct Family {
    personal: bool,
    kind: &'static str,
    says: [&'static str; 2],
    update: Option<&'static str>,
    asks: &'static str,
    values: Values,
}

const PEOPLE: &[&str] = &[
    "Priya", "Marcus", "Elena", "Tomasz", "Aiko", "Jonas", "Fatima", "Diego", "Grace", "Omar",
];
const CITIES: &[&str] = &[
    "Lisbon",
    "Denver",
    "Osaka",
    "Toronto",
    "Nairobi",
    "Austin",
    "Krakow",
    "Melbourne",
    "Bogota",
    "Dublin",
];
const COMPANIES: &[&str] = &[
    "Stripe",
    "Boeing",
    "a local bakery",
    "the city library",
    "Spotify",
    "a hospital",
    "Shopify",
    "a law firm",
    "NASA",
    "a startup",
];
const FOODS: &[&str] = &[
    "peanuts",
    "shellfish",
    "gluten",
    "dairy",
    "eggs",
    "sesame",
    "soy",
    "kiwi",
];
const LIKES: &[&str] = &[
    "jazz records",
    "trail running",
    "board games",
    "Thai food",
    "watercolor painting",
    "old sci-fi films",
    "rock climbing",
    "baking bread",
    "chess",
    "gardening",
];
const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const CONFIG_FILES: &[&str] = &[
    "settings.toml",
    "config.yaml",
    "the environment",
    "Consul",
    "a feature flag",
    "the admin console",
    "Vault",
    "a JSON file in S3",
];

const FAMILIES: &[Family] = &[
    Family {
        personal: false,
        kind: "fact",
        says: [
            "{S} retries a failed {T} call {V} times before giving up.",
            "A failed {T} call in {S} is tried again {V} times, then it stops.",
        ],
        update: Some("{S} now retries a failed {T} call {V} times before giving up."),
        asks: "How many times does {S} retry a failed {T} call?",
        values: Values::Number(2, 12),
    },
    Family {
        personal: false,
        kind: "fact",
        says: [
            "The {T} timeout in {S} is {V} seconds.",
            "{S} abandons a {T} that takes longer than {V} seconds.",
        ],
        update: Some("We changed the {T} timeout in {S}: it is {V} seconds now."),
        asks: "What is the {T} timeout in {S}?",
        values: Values::Number(3, 120),
    },
    Family {
        personal: false,
        kind: "note",
        says: [
            "The {T} code in {S} is owned by {V}'s team.",
            "{V}'s team maintains the {T} part of {S}.",
        ],
        update: Some("{V}'s team took over the {T} code in {S}."),
        asks: "Who owns the {T} code in {S}?",
        values: Values::List(PEOPLE),
    },
    Family {
        personal: false,
        kind: "pitfall",
        says: [
            "{S} crashes with error {V} when the {T} is empty.",
            "An empty {T} makes {S} fail hard with error {V}.",
        ],
        update: None,
        asks: "Why does {S} break on an empty {T}?",
        values: Values::ErrorCode,
    },
    Family {
        personal: false,
        kind: "convention",
        says: [
            "Every change to the {T} logic in {S} needs sign-off from {V}.",
            "{V} has to approve any edit to how {S} handles the {T}.",
        ],
        update: Some("From now on {V} signs off changes to the {T} logic in {S}."),
        asks: "Who approves changes to the {T} logic in {S}?",
        values: Values::List(PEOPLE),
    },
    Family {
        personal: false,
        kind: "note",
        says: [
            "{S} reads its {T} settings from {V}.",
            "The {T} configuration of {S} lives in {V}.",
        ],
        update: Some("{S} moved its {T} settings to {V}."),
        asks: "Where does {S} get its {T} settings from?",
        values: Values::List(CONFIG_FILES),
    },
    Family {
        personal: false,
        kind: "fact",
        says: [
            "{S} rejects any {T} larger than {V} megabytes.",
            "The size limit for a {T} in {S} is {V} MB.",
        ],
        update: Some("{S} raised its {T} size limit to {V} megabytes."),
        asks: "How big can a {T} be in {S}?",
        values: Values::Number(1, 512),
    },
    Family {
        personal: true,
        kind: "fact",
        says: ["My {S} lives in {V}.", "{V} is where my {S} is based."],
        update: Some("My {S} just moved to {V}."),
        asks: "Which city does my {S} live in?",
        values: Values::List(CITIES),
    },
    Family {
        personal: true,
        kind: "fact",
        says: ["My {S} works at {V}.", "{V} is my {S}'s employer."],
        update: Some("My {S} changed jobs and works at {V} now."),
        asks: "Who does my {S} work for?",
        values: Values::List(COMPANIES),
    },
    Family {
        personal: true,
        kind: "preference",
        says: [
            "My {S} is allergic to {V}, so nothing with it when we cook.",
            "No {V} in anything I make for my {S}: allergy.",
        ],
        update: None,
        asks: "What food allergy does my {S} have?",
        values: Values::List(FOODS),
    },
    Family {
        personal: true,
        kind: "preference",
        says: [
            "My {S} is really into {V}.",
            "Nothing makes my {S} happier than {V}.",
        ],
        update: Some("These days my {S} is mostly into {V}."),
        asks: "What hobby or treat would make my {S} happy?",
        values: Values::List(LIKES),
    },
    Family {
        personal: true,
        kind: "fact",
        says: ["My {S}'s birthday is in {V}.", "My {S} was born in {V}."],
        update: None,
        asks: "In which month is my {S}'s birthday?",
        values: Values::List(MONTHS),
    },
];

const SERVICES: &[&str] = &[
    "ApiGateway",
    "PaymentsService",
    "SearchService",
    "AuthService",
    "Checkout",
    "Inventory",
    "Notifications",
    "Billing",
    "Reporting",
    "Scheduler",
    "Frontend",
    "Ledger",
    "Catalog",
    "Shipping",
    "Analytics",
    "MediaStore",
];
const THINGS: &[&str] = &[
    "payload", "batch", "webhook", "export", "session", "token", "upload", "invoice", "refund",
    "report",
];
const RELATIONS: &[&str] = &[
    "sister",
    "brother",
    "cousin",
    "neighbour",
    "colleague",
    "aunt",
    "uncle",
    "friend",
];
/// People of the personal facts; each has one relation to the writer
/// (`RELATIONS[i % len]`), so "my sister Ana" is one person. Once every
/// person has every fact, new people share first names with earlier ones
/// and get an initial and the next relation ("my brother Ana B.").
const NAMES: &[&str] = &[
    "Ana", "Ben", "Chloe", "Dev", "Emma", "Felix", "Gia", "Hugo", "Ines", "Jack", "Kira", "Leo",
    "Maya", "Nico", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wes",
    "Xena", "Yusuf", "Zoe", "Arjun", "Bea", "Carlos", "Dana", "Eli", "Fern", "Gus", "Hana", "Ivo",
    "Jade", "Kofi", "Lena", "Milo", "Nora",
];
const TENANTS: &[&str] = &["acme", "globex", "initech", "umbrella", "hooli"];

/// What an agent asks before it changes part of a service.
const TASK_ASKS: &str = "I'm about to change how {S} handles the {T}. What should I watch out for?";
/// Mixed into the seed for the task questions' own random stream: drawing
/// them leaves every other part of the corpus as it was without them.
const TASK_STREAM: u64 = 0x7A5C_D15E_A5E5_0001;
/// The same for the facts re-learned after a drift.
const RELEARN_STREAM: u64 = 0x7A5C_D15E_A5E5_0002;

/// A fact's identity: family, subject (service or person),
/// thing (engineering) and round (subjects get a suffix once every
/// combination is used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct FactKey {
    family: usize,
    subject: usize,
    thing: usize,
    round: usize,
}

impl FactKey {
    fn family(&self) -> &'static Family {
        &FAMILIES[self.family]
    }

    /// The subject as written: a service (its element) or "relation name".
    fn subject(&self) -> String {
        if self.family().personal {
            // A second Vera is another person: another relation too.
            let relation = RELATIONS[(self.subject + self.round) % RELATIONS.len()];
            let name = NAMES[self.subject];
            match self.round {
                0 => format!("{relation} {name}"),
                r => format!("{relation} {name} {}.", initial(r)),
            }
        } else {
            let service = SERVICES[self.subject];
            match self.round {
                0 => service.to_string(),
                r => format!("{service}{}", r + 1),
            }
        }
    }

    fn fill(&self, template: &str, value: &str) -> String {
        let thing = THINGS[self.thing];
        let article = match thing.starts_with(['a', 'e', 'i', 'o', 'u']) {
            true => "an",
            false => "a",
        };
        template
            .replace(" a {T}", &format!(" {article} {thing}"))
            .replace("{S}", &self.subject())
            .replace("{T}", thing)
            .replace("{V}", value)
    }
}

/// A second-round name's initial: B., C., … (then doubled).
fn initial(round: usize) -> String {
    let letter = char::from(b'A' + (round % 26) as u8);
    letter.to_string().repeat(1 + round / 26)
}

/// Every fact key of one domain in `round`.
fn keys_of(personal: bool, round: usize) -> Vec<FactKey> {
    let mut keys = Vec::new();
    for (family, f) in FAMILIES.iter().enumerate() {
        if f.personal != personal {
            continue;
        }
        let (subjects, things) = if personal {
            (NAMES.len(), 1)
        } else {
            (SERVICES.len(), THINGS.len())
        };
        for subject in 0..subjects {
            for thing in 0..things {
                keys.push(FactKey {
                    family,
                    subject,
                    thing,
                    round,
                });
            }
        }
    }
    keys
}

/// `n` distinct keys of one domain in random order, round after round, and
/// the first key not taken (for an unanswerable question).
fn draw_keys(rng: &mut ChaCha8Rng, personal: bool, n: usize, spare: usize) -> Vec<FactKey> {
    let mut out = Vec::with_capacity(n + spare);
    let mut round = 0;
    while out.len() < n + spare {
        let mut keys = keys_of(personal, round);
        keys.shuffle(rng);
        out.extend(keys.into_iter().take(n + spare - out.len()));
        round += 1;
    }
    out
}

fn value(rng: &mut ChaCha8Rng, values: Values, not: Option<&str>) -> String {
    loop {
        let v = match values {
            Values::List(list) => list[rng.random_range(0..list.len())].to_string(),
            Values::Number(lo, hi) => rng.random_range(lo..=hi).to_string(),
            Values::ErrorCode => format!("E{}", rng.random_range(1000..10_000)),
        };
        if Some(v.as_str()) != not {
            return v;
        }
    }
}

/// One tenant's facts as written: keys of its writes by fact, and the
/// writes themselves.
struct Fact {
    key: FactKey,
    /// `<tenant>/f<i>`: its writes' keys start with it.
    stem: String,
    /// The value first written.
    value: String,
    /// Where its writes go.
    bank: String,
    original: String,
    repeat: Option<String>,
    paraphrase: Option<String>,
    update: Option<String>,
    element: Option<String>,
}

impl Fact {
    /// The keys of the writes that state its current value, and of those an
    /// update replaced.
    fn versions(&self) -> (Vec<String>, Vec<String>) {
        let said = [
            Some(&self.original),
            self.repeat.as_ref(),
            self.paraphrase.as_ref(),
        ];
        let said: Vec<String> = said.into_iter().flatten().cloned().collect();
        match &self.update {
            Some(update) => (vec![update.clone()], said),
            None => (said, Vec::new()),
        }
    }
}

/// Generates a corpus. Deterministic in `config`.
///
/// ```
/// use recall_datasets::corpus::{CorpusConfig, generate};
/// let config = CorpusConfig { facts: 120, queries: 30, ..CorpusConfig::default() };
/// let a = generate(&config);
/// assert_eq!(a, generate(&config));
/// assert!(a.writes.len() >= 120);
/// assert!(a.queries.iter().all(|q| q.group == "unanswerable" || !q.gold.is_empty()));
/// ```
pub fn generate(config: &CorpusConfig) -> Corpus {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let tenants = config.tenants.max(1);
    let span = Duration::days(config.days.max(1));
    let asked_at = config.start + span;
    let at = |rng: &mut ChaCha8Rng, from: f64, to: f64| {
        let share = rng.random_range(from..to);
        config.start + Duration::seconds((span.num_seconds() as f64 * share) as i64)
    };
    let chance = |rng: &mut ChaCha8Rng, p: f64| rng.random_bool(p.clamp(0.0, 1.0));
    let (mut writes, mut drifts, mut queries) = (Vec::new(), Vec::new(), Vec::new());
    let mut task_rng = ChaCha8Rng::seed_from_u64(config.seed ^ TASK_STREAM);
    let mut tasks = Vec::new();
    let mut relearn_rng = ChaCha8Rng::seed_from_u64(config.seed ^ RELEARN_STREAM);
    let (mut relearned, mut relearned_writes) = (Vec::new(), Vec::new());
    for t in 0..tenants {
        let tenant = match TENANTS.get(t) {
            Some(name) => name.to_string(),
            None => format!("tenant{t}"),
        };
        let n = config.facts / tenants + usize::from(t < config.facts % tenants);
        let personal = ((n as f64) * config.personal_share.clamp(0.0, 1.0)).round() as usize;
        let queries_here = config.queries / tenants + usize::from(t < config.queries % tenants);
        let unanswerable = ((queries_here as f64) * config.unanswerable_share).round() as usize;
        // A few more keys than written: the spares are the unanswerable questions.
        let spare_personal = unanswerable / 2;
        let mut keys = draw_keys(&mut rng, true, personal, spare_personal);
        let spares_p = keys.split_off(personal);
        let mut engineering =
            draw_keys(&mut rng, false, n - personal, unanswerable - spare_personal);
        let spares_e = engineering.split_off(n - personal);
        keys.extend(engineering);

        let mut facts = Vec::with_capacity(keys.len());
        let mut last_write: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
        for (i, key) in keys.into_iter().enumerate() {
            let family = key.family();
            let stem = format!("{tenant}/f{i}");
            let element = (!family.personal).then(|| key.subject());
            let bank = match &element {
                None => "user:me".to_string(),
                Some(_) if chance(&mut rng, 0.2) => "org".to_string(),
                Some(service) => format!("repo:{}", service.to_lowercase()),
            };
            let old = value(&mut rng, family.values, None);
            let first = at(&mut rng, 0.0, 0.75);
            let mut write = |suffix: &str, content: String, when, role| {
                let key = format!("{stem}/{suffix}");
                if let Some(e) = &element {
                    let last = last_write.entry(e.clone()).or_insert(when);
                    *last = (*last).max(when);
                }
                writes.push(CorpusWrite {
                    key: key.clone(),
                    tenant: tenant.clone(),
                    bank: bank.clone(),
                    kind: family.kind,
                    content,
                    element: element.clone(),
                    at: when,
                    role,
                });
                key
            };
            let original = write(
                "original",
                key.fill(family.says[0], &old),
                first,
                Role::Original,
            );
            let later = |rng: &mut ChaCha8Rng| {
                let from = (first - config.start).num_seconds() as f64 / span.num_seconds() as f64;
                at(rng, from + 1e-6, 0.9)
            };
            let repeat = chance(&mut rng, config.repeat_share).then(|| {
                let when = later(&mut rng);
                let text = key.fill(family.says[0], &old);
                write("repeat", text, when, Role::Repeat(original.clone()))
            });
            let paraphrase = chance(&mut rng, config.paraphrase_share).then(|| {
                let when = later(&mut rng);
                let text = key.fill(family.says[1], &old);
                write("paraphrase", text, when, Role::Paraphrase(original.clone()))
            });
            let update = match family.update {
                Some(template) if chance(&mut rng, config.update_share) => {
                    let when = later(&mut rng);
                    let new = value(&mut rng, family.values, Some(&old));
                    let text = key.fill(template, &new);
                    Some(write("update", text, when, Role::Update(original.clone())))
                }
                _ => None,
            };
            facts.push(Fact {
                key,
                stem,
                value: old,
                bank,
                original,
                repeat,
                paraphrase,
                update,
                element,
            });
        }

        let mut drifted = BTreeSet::new();
        for (element, last) in &last_write {
            if chance(&mut rng, config.drift_share) {
                let after = Duration::minutes(rng.random_range(60..5 * 24 * 60));
                let when = (*last + after).min(asked_at - Duration::hours(1));
                drifts.push(CorpusDrift {
                    tenant: tenant.clone(),
                    element: element.clone(),
                    at: when,
                });
                drifted.insert(element.clone());
            }
        }

        // Questions: the answerable ones spread over the groups (what is
        // there of each), the rest plain; then the unanswerable ones.
        let group_of = |f: &Fact| {
            if f.update.is_some() {
                "updated"
            } else if f.element.as_ref().is_some_and(|e| drifted.contains(e)) {
                "drifted"
            } else if f.paraphrase.is_some() {
                "paraphrased"
            } else if f.repeat.is_some() {
                "repeated"
            } else {
                "plain"
            }
        };
        let answerable = queries_here - unanswerable;
        let mut order: Vec<usize> = (0..facts.len()).collect();
        order.shuffle(&mut rng);
        let mut chosen = Vec::new();
        let quota = answerable / 5;
        for group in ["updated", "drifted", "paraphrased", "repeated"] {
            let of_group = order.iter().filter(|&&i| group_of(&facts[i]) == group);
            chosen.extend(of_group.take(quota).copied());
        }
        let taken: BTreeSet<usize> = chosen.iter().copied().collect();
        let more = answerable.saturating_sub(chosen.len());
        chosen.extend(order.iter().filter(|i| !taken.contains(i)).take(more));
        for &i in &chosen {
            let f = &facts[i];
            let (gold, stale) = f.versions();
            queries.push(CorpusQuery {
                id: format!("{tenant}/q{}", queries.len()),
                tenant: tenant.clone(),
                text: f.key.fill(f.key.family().asks, ""),
                group: group_of(f),
                gold,
                stale,
                drifted: f.element.as_ref().is_some_and(|e| drifted.contains(e)),
            });
        }
        for key in spares_p.iter().chain(&spares_e) {
            queries.push(CorpusQuery {
                id: format!("{tenant}/q{}", queries.len()),
                tenant: tenant.clone(),
                text: key.fill(key.family().asks, ""),
                group: "unanswerable",
                gold: Vec::new(),
                stale: Vec::new(),
                drifted: false,
            });
        }

        // After its code drifted the agent re-learns some facts about the
        // service: a new value, written after the drift, so only the old
        // one carries the drift. Facts asked about above are left alone.
        let asked: BTreeSet<usize> = chosen.iter().copied().collect();
        let mut relearnable: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, f) in facts.iter().enumerate() {
            if let Some(element) = &f.element
                && !asked.contains(&i)
                && f.update.is_none()
                && f.key.family().update.is_some()
            {
                relearnable.entry(element.clone()).or_default().push(i);
            }
        }
        let mut relearned_keys = BTreeSet::new();
        let mut asked_here = 0;
        for d in drifts.iter().filter(|d| d.tenant == tenant) {
            let room = (asked_at - Duration::minutes(1) - d.at).num_minutes();
            let mut candidates = relearnable
                .get(d.element.as_str())
                .cloned()
                .unwrap_or_default();
            candidates.shuffle(&mut relearn_rng);
            for i in candidates.into_iter().take(config.relearned_per_drift) {
                let f = &facts[i];
                let (Some(template), true) = (f.key.family().update, room > 60) else {
                    continue;
                };
                let when = d.at + Duration::minutes(relearn_rng.random_range(60..=room));
                let new = value(&mut relearn_rng, f.key.family().values, Some(&f.value));
                let key = format!("{}/relearned", f.stem);
                relearned_writes.push(CorpusWrite {
                    key: key.clone(),
                    tenant: tenant.clone(),
                    bank: f.bank.clone(),
                    kind: f.key.family().kind,
                    content: f.key.fill(template, &new),
                    element: f.element.clone(),
                    at: when,
                    role: Role::Update(f.original.clone()),
                });
                // Asked about as often as a group of fact questions at most.
                if asked_here < quota {
                    asked_here += 1;
                    relearned.push(CorpusQuery {
                        id: format!("{tenant}/r{}", relearned.len()),
                        tenant: tenant.clone(),
                        text: f.key.fill(f.key.family().asks, ""),
                        group: "relearned",
                        gold: vec![key.clone()],
                        stale: f.versions().0,
                        drifted: false,
                    });
                }
                // Its current value from now on (for the task questions).
                relearned_keys.insert(key.clone());
                facts[i].update = Some(key);
            }
        }

        // Before a change to one part of a service: its pitfalls and
        // conventions, current versions. The versions an update replaced
        // are neither gold nor stale here (newest-first is measured on the
        // fact questions).
        let mut cautions: BTreeMap<(usize, usize, usize), (FactKey, Vec<String>)> = BTreeMap::new();
        for f in &facts {
            if matches!(f.key.family().kind, "pitfall" | "convention") {
                let part = (f.key.subject, f.key.thing, f.key.round);
                let entry = cautions.entry(part).or_insert_with(|| (f.key, Vec::new()));
                entry.1.extend(f.versions().0);
            }
        }
        let mut cautions: Vec<(FactKey, Vec<String>)> = cautions.into_values().collect();
        cautions.shuffle(&mut task_rng);
        let tasks_here =
            config.task_queries / tenants + usize::from(t < config.task_queries % tenants);
        for (key, gold) in cautions.into_iter().take(tasks_here) {
            tasks.push(CorpusQuery {
                id: format!("{tenant}/t{}", tasks.len()),
                tenant: tenant.clone(),
                text: key.fill(TASK_ASKS, ""),
                group: "task",
                stale: Vec::new(),
                // A value re-learned after the drift carries none.
                drifted: drifted.contains(&key.subject())
                    && gold.iter().all(|g| !relearned_keys.contains(g)),
                gold,
            });
        }
    }
    queries.extend(tasks);
    queries.extend(relearned);
    writes.extend(relearned_writes);
    writes.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.key.cmp(&b.key)));
    drifts.sort_by_key(|d| d.at);
    Corpus {
        writes,
        drifts,
        queries,
        asked_at,
    }
}

impl Corpus {
    /// Clustered unit vectors of `dim` dimensions for the writes and the
    /// queries (in their orders), standing in for the model's at a scale it
    /// cannot embed in time. Each subject (service, or person) has a
    /// centroid and each fact a vector near it (cosine ≈ 0.7); a repeat has
    /// its original's vector, a paraphrase one at cosine 0.95–0.99 to it
    /// (the dedup band), an update one at 0.84–0.92 (the similar band), and
    /// a question one at ≈ 0.9 to its gold's (an unanswerable one, near a
    /// direction of its own). What they measure is the machinery (the write
    /// path's near-copy search, isolation, the cost of recall at size),
    /// not the model.
    pub fn synthetic_vectors(&self, seed: u64, dim: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut centroids: BTreeMap<String, Vec<f32>> = BTreeMap::new();
        let mut by_key: BTreeMap<&str, Vec<f32>> = BTreeMap::new();
        let mut out = Vec::with_capacity(self.writes.len());
        for (i, w) in self.writes.iter().enumerate() {
            let subject = subject_of(w);
            let v = match &w.role {
                Role::Original => {
                    let c = centroids
                        .entry(subject)
                        .or_insert_with(|| unit_vector(&mut rng, dim));
                    near_copy(rng.random(), c, 0.7)
                }
                Role::Repeat(of) => by_key.get(of.as_str()).cloned().unwrap_or_default(),
                Role::Paraphrase(of) => match by_key.get(of.as_str()) {
                    Some(o) => near_copy(i as u64, o, rng.random_range(0.95..0.99)),
                    None => Vec::new(),
                },
                Role::Update(of) => match by_key.get(of.as_str()) {
                    Some(o) => near_copy(i as u64, o, rng.random_range(0.84..0.92)),
                    None => Vec::new(),
                },
            };
            by_key.insert(&w.key, v.clone());
            out.push(v);
        }
        let queries = self
            .queries
            .iter()
            .enumerate()
            .map(
                |(i, q)| match q.gold.first().and_then(|g| by_key.get(g.as_str())) {
                    Some(v) => query_near(seed ^ i as u64, v),
                    None => {
                        let c = centroids
                            .entry(format!("{}|{}", q.tenant, q.text))
                            .or_insert_with(|| unit_vector(&mut rng, dim));
                        query_near(seed ^ i as u64, c)
                    }
                },
            )
            .collect();
        (out, queries)
    }
}

/// The centroid a write's vector clusters around: its service, or its bank
/// (personal facts) within its tenant.
fn subject_of(w: &CorpusWrite) -> String {
    format!(
        "{}|{}",
        w.tenant,
        w.element.as_deref().unwrap_or(w.bank.as_str())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> CorpusConfig {
        CorpusConfig {
            facts: 600,
            queries: 90,
            repeat_share: 0.2,
            paraphrase_share: 0.2,
            update_share: 0.2,
            drift_share: 0.3,
            task_queries: 30,
            ..CorpusConfig::default()
        }
    }

    #[test]
    fn shares_roles_and_keys_are_as_configured() {
        let c = generate(&small());
        let count = |f: fn(&Role) -> bool| c.writes.iter().filter(|w| f(&w.role)).count();
        assert_eq!(count(|r| matches!(r, Role::Original)), 600);
        for n in [
            count(|r| matches!(r, Role::Repeat(_))),
            count(|r| matches!(r, Role::Paraphrase(_))),
        ] {
            assert!((80..=160).contains(&n), "{n} of 600 at 0.2");
        }
        let keys: BTreeSet<&str> = c.writes.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(keys.len(), c.writes.len(), "keys are unique");
        let tenants: BTreeSet<&str> = c.writes.iter().map(|w| w.tenant.as_str()).collect();
        assert_eq!(tenants.len(), 3);
        assert!(c.writes.windows(2).all(|w| w[0].at <= w[1].at));
        assert!(c.writes.iter().all(|w| w.at < c.asked_at));
        // Every repeat is its original's text, written later.
        let by_key: BTreeMap<&str, &CorpusWrite> =
            c.writes.iter().map(|w| (w.key.as_str(), w)).collect();
        for w in &c.writes {
            if let Role::Repeat(of) | Role::Paraphrase(of) | Role::Update(of) = &w.role {
                let original = by_key[of.as_str()];
                assert!(original.at < w.at);
                assert_eq!(original.tenant, w.tenant);
                assert_eq!(
                    matches!(w.role, Role::Repeat(_)),
                    original.content == w.content
                );
            }
        }
    }

    #[test]
    fn queries_name_gold_of_their_own_tenant_and_groups_hold() {
        let c = generate(&small());
        let by_key: BTreeMap<&str, &CorpusWrite> =
            c.writes.iter().map(|w| (w.key.as_str(), w)).collect();
        let drifted: BTreeSet<(&str, &str)> = c
            .drifts
            .iter()
            .map(|d| (d.tenant.as_str(), d.element.as_str()))
            .collect();
        let asked = |group: &str| c.queries.iter().filter(|q| q.group == group).count();
        assert_eq!(c.queries.len() - asked("task") - asked("relearned"), 90);
        let mut groups = BTreeSet::new();
        for q in &c.queries {
            groups.insert(q.group);
            for g in q.gold.iter().chain(&q.stale) {
                assert_eq!(by_key[g.as_str()].tenant, q.tenant, "{}", q.id);
            }
            match q.group {
                "unanswerable" => assert!(q.gold.is_empty()),
                "updated" | "relearned" => {
                    assert!(matches!(by_key[q.gold[0].as_str()].role, Role::Update(_)));
                    assert!(!q.stale.is_empty());
                }
                "drifted" => assert!(q.drifted),
                _ => assert!(q.stale.is_empty() && !q.gold.is_empty()),
            }
            // A drifted answer's element drifted after every write about it.
            if q.drifted {
                let w = by_key[q.gold[0].as_str()];
                let element = w.element.as_deref().unwrap_or_default();
                assert!(drifted.contains(&(q.tenant.as_str(), element)));
                let d = c
                    .drifts
                    .iter()
                    .find(|d| d.tenant == q.tenant && d.element == element);
                assert!(d.is_some_and(|d| q.gold.iter().all(|g| by_key[g.as_str()].at < d.at)));
            }
        }
        assert_eq!(groups.len(), 8, "{groups:?}");
    }

    #[test]
    fn relearned_facts_come_after_their_drift_and_change_nothing_else() {
        let c = generate(&small());
        let without = generate(&CorpusConfig {
            relearned_per_drift: 0,
            ..small()
        });
        let (new, old): (Vec<&CorpusWrite>, Vec<&CorpusWrite>) =
            c.writes.iter().partition(|w| w.key.ends_with("/relearned"));
        assert_eq!(old, without.writes.iter().collect::<Vec<_>>());
        assert_eq!(c.drifts, without.drifts);
        // The task questions' gold follows the new values; the rest is as it was.
        let (relearned, rest): (Vec<&CorpusQuery>, Vec<&CorpusQuery>) = c
            .queries
            .iter()
            .filter(|q| q.group != "task")
            .partition(|q| q.group == "relearned");
        let before: Vec<&CorpusQuery> = without
            .queries
            .iter()
            .filter(|q| q.group != "task")
            .collect();
        assert_eq!(rest, before);
        // Every re-learned fact is written; questions about them are capped
        // per tenant at a fact group's share (27 answerable / 5).
        assert!(!relearned.is_empty(), "0.3 of the services drift");
        assert!(relearned.len() <= new.len());
        for tenant in ["acme", "globex", "initech"] {
            assert!(relearned.iter().filter(|q| q.tenant == tenant).count() <= 5);
        }
        let by_key: BTreeMap<&str, &CorpusWrite> =
            c.writes.iter().map(|w| (w.key.as_str(), w)).collect();
        for q in relearned {
            let w = by_key[q.gold[0].as_str()];
            let element = w.element.as_deref().unwrap_or_default();
            let drift = c
                .drifts
                .iter()
                .find(|d| d.tenant == q.tenant && d.element == element);
            // Written after its service drifted; every older version before.
            assert!(
                drift.is_some_and(|d| d.at < w.at && w.at < c.asked_at),
                "{}",
                q.id
            );
            for s in &q.stale {
                let older = by_key[s.as_str()];
                assert!(drift.is_some_and(|d| older.at < d.at));
                assert_eq!(
                    (older.tenant.as_str(), older.bank.as_str()),
                    (w.tenant.as_str(), w.bank.as_str())
                );
                assert_ne!(older.content, w.content);
            }
            // Nobody else asks about that fact.
            assert!(
                rest.iter()
                    .all(|r| !r.gold.iter().chain(&r.stale).any(|k| q.stale.contains(k)))
            );
        }
    }

    #[test]
    fn task_questions_ask_for_every_caution_about_one_part_and_change_nothing_else() {
        let c = generate(&small());
        let without = generate(&CorpusConfig {
            task_queries: 0,
            ..small()
        });
        assert_eq!((&c.writes, &c.drifts), (&without.writes, &without.drifts));
        let (tasks, rest): (Vec<&CorpusQuery>, Vec<&CorpusQuery>) =
            c.queries.iter().partition(|q| q.group == "task");
        assert_eq!(rest, without.queries.iter().collect::<Vec<_>>());
        assert_eq!(tasks.len(), 30);
        // The originals an update replaced (with their repeats and paraphrases).
        let replaced: BTreeSet<&str> = c
            .writes
            .iter()
            .filter_map(|w| match &w.role {
                Role::Update(of) => Some(of.as_str()),
                _ => None,
            })
            .collect();
        let original_of = |w: &CorpusWrite| match &w.role {
            Role::Repeat(of) | Role::Paraphrase(of) | Role::Update(of) => of.clone(),
            Role::Original => w.key.clone(),
        };
        for q in tasks {
            let (element, thing) = q
                .text
                .strip_prefix("I'm about to change how ")
                .and_then(|t| t.split_once(" handles the "))
                .and_then(|(e, rest)| Some((e, rest.split_once('.')?.0)))
                .unwrap_or_else(|| panic!("{}", q.text));
            let cautions: BTreeSet<&str> = c
                .writes
                .iter()
                .filter(|w| {
                    w.tenant == q.tenant
                        && w.element.as_deref() == Some(element)
                        && matches!(w.kind, "pitfall" | "convention")
                        && w.content
                            .split(|c: char| !c.is_alphanumeric())
                            .any(|word| word == thing)
                        && (matches!(w.role, Role::Update(_))
                            || !replaced.contains(original_of(w).as_str()))
                })
                .map(|w| w.key.as_str())
                .collect();
            let gold: BTreeSet<&str> = q.gold.iter().map(String::as_str).collect();
            assert_eq!(gold, cautions, "{}", q.text);
            assert!(q.stale.is_empty());
        }
    }

    #[test]
    fn more_facts_than_combinations_get_suffixed_subjects() {
        let config = CorpusConfig {
            facts: 2 * (keys_of(false, 0).len() + keys_of(true, 0).len()),
            tenants: 1,
            queries: 10,
            ..CorpusConfig::default()
        };
        let c = generate(&config);
        let originals: BTreeSet<&str> = c
            .writes
            .iter()
            .filter(|w| w.role == Role::Original)
            .map(|w| w.content.as_str())
            .collect();
        // Distinct facts, distinct texts (values may coincide, subjects do not).
        let statements = c.writes.iter().filter(|w| w.role == Role::Original).count();
        assert_eq!(statements, config.facts);
        assert!(originals.len() > config.facts * 95 / 100);
        assert!(c.writes.iter().any(|w| w.content.contains("Billing2")));
    }

    #[test]
    fn things_take_their_article() {
        let key = |thing: &str| FactKey {
            family: 0,
            subject: 0,
            thing: THINGS.iter().position(|t| *t == thing).unwrap_or_default(),
            round: 0,
        };
        let asks = "How big can a {T} be in {S}?";
        assert_eq!(
            key("upload").fill(asks, ""),
            "How big can an upload be in ApiGateway?"
        );
        assert_eq!(
            key("batch").fill(asks, ""),
            "How big can a batch be in ApiGateway?"
        );
    }

    #[test]
    fn synthetic_vectors_keep_the_structure() {
        let c = generate(&small());
        let (writes, queries) = c.synthetic_vectors(1, 64);
        assert_eq!(
            (writes.len(), queries.len()),
            (c.writes.len(), c.queries.len())
        );
        let index: BTreeMap<&str, usize> = c
            .writes
            .iter()
            .enumerate()
            .map(|(i, w)| (w.key.as_str(), i))
            .collect();
        let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        for (i, w) in c.writes.iter().enumerate() {
            let (of, lo, hi) = match &w.role {
                Role::Original => continue,
                Role::Repeat(of) => (of, 0.999, 1.001),
                Role::Paraphrase(of) => (of, 0.949, 0.991),
                Role::Update(of) => (of, 0.839, 0.921),
            };
            let c = cos(&writes[i], &writes[index[of.as_str()]]);
            assert!((lo..hi).contains(&c), "{:?}: {c}", w.role);
        }
    }
}

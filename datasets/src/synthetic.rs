//! Seeded synthetic engineering corpora for speed runs: templated text and
//! clustered unit vectors (no model in the loop: embedding a million texts
//! would take an hour on this machine). Same seed, same corpus.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One generated memory.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticMemory {
    /// Bank (`repo:<name>` or `org`).
    pub bank: String,
    /// Kind name (`pitfall`, `convention`, `note`, `fact`).
    pub kind: &'static str,
    /// The text.
    pub content: String,
    /// The element it is about.
    pub element: String,
    /// A unit vector near its topic's centroid.
    pub vector: Vec<f32>,
}

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
    "Postgres",
    "Redis",
    "Kafka",
];
const TEMPLATES: &[(&str, &str)] = &[
    (
        "pitfall",
        "{svc} fails with error {code} when the {thing} exceeds {n} {unit}.",
    ),
    (
        "pitfall",
        "Do not restart {svc} during the {thing} window; it drops in-flight requests after {n} {unit}.",
    ),
    (
        "convention",
        "All changes to {svc} need a migration note and a {thing} check under {n} {unit}.",
    ),
    (
        "convention",
        "{svc} logs use structured fields; the {thing} id is attached to every span.",
    ),
    (
        "note",
        "The {thing} dashboard for {svc} shows p99 latency over the last {n} {unit}.",
    ),
    (
        "note",
        "{svc} reads its {thing} settings from config/{svc_lower}.yaml at startup.",
    ),
    (
        "fact",
        "{svc} runs {n} replicas behind the {thing} load balancer.",
    ),
    (
        "fact",
        "The {thing} queue for {svc} retains messages for {n} {unit}.",
    ),
];
const THINGS: &[&str] = &[
    "payload", "batch", "retry", "cache", "session", "token", "export", "webhook", "index",
    "deploy",
];
const UNITS: &[&str] = &["seconds", "minutes", "megabytes", "requests", "days"];

fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::EPSILON);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

pub(crate) fn unit_vector(rng: &mut ChaCha8Rng, dim: usize) -> Vec<f32> {
    unit((0..dim).map(|_| rng.random::<f32>() * 2.0 - 1.0).collect())
}

/// `n` memories over `topics` clusters of `dim`-wide vectors. Each vector is
/// its topic centroid plus noise (cosine to the centroid ≈ 0.6–0.8), so
/// nearest-neighbour structure resembles real embeddings more than uniform
/// noise does. Deterministic in `seed`; the same items as
/// [`SyntheticCorpus`] yields one at a time.
///
/// ```
/// let a = recall_datasets::synthetic_corpus(7, 50, 16, 5);
/// let b = recall_datasets::synthetic_corpus(7, 50, 16, 5);
/// assert_eq!(a, b);
/// assert_eq!(a.len(), 50);
/// ```
pub fn synthetic_corpus(seed: u64, n: usize, dim: usize, topics: usize) -> Vec<SyntheticMemory> {
    SyntheticCorpus::new(seed, n, dim, topics).collect()
}

/// [`synthetic_corpus`] as an iterator: one item at a time, so a run over
/// ten million memories never holds them all (their vectors alone would
/// be 15 GB). Only the topic centroids are kept.
///
/// ```
/// use recall_datasets::{SyntheticCorpus, synthetic_corpus};
/// let streamed: Vec<_> = SyntheticCorpus::new(7, 50, 16, 5).collect();
/// assert_eq!(streamed, synthetic_corpus(7, 50, 16, 5));
/// ```
#[derive(Debug, Clone)]
pub struct SyntheticCorpus {
    rng: ChaCha8Rng,
    centroids: Vec<Vec<f32>>,
    next: usize,
    n: usize,
}

impl SyntheticCorpus {
    /// The corpus of `n` items (see [`synthetic_corpus`]).
    pub fn new(seed: u64, n: usize, dim: usize, topics: usize) -> SyntheticCorpus {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let centroids = (0..topics.max(1))
            .map(|_| unit_vector(&mut rng, dim))
            .collect();
        SyntheticCorpus {
            rng,
            centroids,
            next: 0,
            n,
        }
    }
}

impl Iterator for SyntheticCorpus {
    type Item = SyntheticMemory;

    fn next(&mut self) -> Option<SyntheticMemory> {
        if self.next >= self.n {
            return None;
        }
        let i = self.next;
        self.next += 1;
        let rng = &mut self.rng;
        let topic = rng.random_range(0..self.centroids.len());
        let noise = unit_vector(rng, self.centroids[topic].len());
        let vector = unit(
            self.centroids[topic]
                .iter()
                .zip(&noise)
                .map(|(c, e)| c + 0.9 * e)
                .collect(),
        );
        let svc = SERVICES[rng.random_range(0..SERVICES.len())];
        let (kind, template) = TEMPLATES[rng.random_range(0..TEMPLATES.len())];
        let content = template
            .replace("{svc_lower}", &svc.to_lowercase())
            .replace("{svc}", svc)
            .replace("{thing}", THINGS[rng.random_range(0..THINGS.len())])
            .replace("{unit}", UNITS[rng.random_range(0..UNITS.len())])
            .replace("{code}", &format!("E{}", 1000 + rng.random_range(0..9000)))
            .replace("{n}", &rng.random_range(2..500).to_string())
            + &format!(" (ref #{i})");
        Some(SyntheticMemory {
            bank: if i.is_multiple_of(5) {
                "org".to_string()
            } else {
                format!("repo:{}", svc.to_lowercase())
            },
            kind,
            content,
            element: svc.to_string(),
            vector,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.n - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for SyntheticCorpus {}

/// A query vector near the given memory's (cosine ≈ 0.9), for speed runs.
pub fn query_near(seed: u64, vector: &[f32]) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let noise = unit_vector(&mut rng, vector.len());
    unit(
        vector
            .iter()
            .zip(&noise)
            .map(|(v, e)| v + 0.45 * e)
            .collect(),
    )
}

/// A near copy of `vector`: the same unit vector turned away from it by a
/// random direction until their cosine is `cosine` (within float rounding),
/// for measuring whether the write path's near-copy search finds what it
/// should (§3's similar band starts at 0.82, dedup at 0.94).
///
/// ```
/// let v = recall_datasets::synthetic_corpus(3, 1, 64, 1).remove(0).vector;
/// let copy = recall_datasets::near_copy(9, &v, 0.9);
/// let cos: f32 = v.iter().zip(&copy).map(|(a, b)| a * b).sum();
/// assert!((cos - 0.9).abs() < 1e-3);
/// ```
pub fn near_copy(seed: u64, vector: &[f32], cosine: f32) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let noise = unit_vector(&mut rng, vector.len());
    // The part of the noise orthogonal to `vector`, as a unit vector.
    let along: f32 = noise.iter().zip(vector).map(|(e, v)| e * v).sum();
    let side = unit(
        noise
            .iter()
            .zip(vector)
            .map(|(e, v)| e - along * v)
            .collect(),
    );
    let cosine = cosine.clamp(-1.0, 1.0);
    let sine = (1.0 - cosine * cosine).sqrt();
    unit(
        vector
            .iter()
            .zip(&side)
            .map(|(v, s)| cosine * v + sine * s)
            .collect(),
    )
}

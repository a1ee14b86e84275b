//! The armed plans: which directories are under test and which of their
//! file operations fail.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::FileOp;

/// How an operation fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// EIO: the device failed.
    Io,
    /// ENOSPC: the disk is full.
    NoSpace,
    /// A write that stores half its bytes and then fails with EIO (a write
    /// of any other operation fails like [`Fault::Io`]).
    Short,
}

impl Fault {
    pub(crate) fn error(self) -> io::Error {
        match self {
            Fault::Io | Fault::Short => io::Error::from_raw_os_error(5),
            Fault::NoSpace => io::Error::from_raw_os_error(28),
        }
    }
}

/// Which operations fail (counted from 0 in the order they run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// None: the operations are only counted and recorded.
    Never,
    /// Operation `n` fails, once.
    Nth(u64),
    /// Every operation from `n` on fails until [`Armed::heal`] (a disk
    /// that stays full).
    From(u64),
    /// Each operation fails with probability `per_mille / 1000`, from a
    /// seeded generator (the same seed fails the same positions).
    Random {
        /// The generator's seed.
        seed: u64,
        /// Chance of failure per operation, in thousandths.
        per_mille: u32,
    },
}

/// What an armed directory does.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Which operations fail.
    pub trigger: Trigger,
    /// How they fail.
    pub fault: Fault,
}

/// One counted operation: what it was and on which file (relative to the
/// armed directory).
pub type Seen = (FileOp, String);

struct State {
    root: PathBuf,
    plan: Plan,
    count: AtomicU64,
    healed: AtomicBool,
    rng: Mutex<u64>,
    seen: Mutex<Vec<Seen>>,
    failed: Mutex<Vec<(u64, Seen)>>,
}

/// A directory under test; disarmed when dropped.
pub struct Armed {
    state: Arc<State>,
}

static ARMED: Mutex<Vec<Arc<State>>> = Mutex::new(Vec::new());

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked while holding it leaves plain counters behind.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Arms `root`: every write-path file operation under it is counted, and
/// fails as `plan` says.
///
/// ```ignore
/// let armed = recall_indexer::faults::arm(dir, Plan { trigger: Trigger::Nth(3), fault: Fault::NoSpace });
/// ```
pub fn arm(root: &Path, plan: Plan) -> Armed {
    let state = Arc::new(State {
        root: root.to_path_buf(),
        plan,
        count: AtomicU64::new(0),
        healed: AtomicBool::new(false),
        rng: Mutex::new(match plan.trigger {
            Trigger::Random { seed, .. } => seed | 1,
            _ => 1,
        }),
        seen: Mutex::new(Vec::new()),
        failed: Mutex::new(Vec::new()),
    });
    locked(&ARMED).push(state.clone());
    Armed { state }
}

impl Armed {
    /// Every operation counted so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        locked(&self.state.seen).clone()
    }

    /// The operations that failed: their position and what they were.
    pub fn failed(&self) -> Vec<(u64, Seen)> {
        locked(&self.state.failed).clone()
    }

    /// Operations counted so far.
    pub fn count(&self) -> u64 {
        self.state.count.load(Ordering::SeqCst)
    }

    /// No operation fails from now on (the disk has space again); they are
    /// still counted.
    pub fn heal(&self) {
        self.state.healed.store(true, Ordering::SeqCst);
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        locked(&ARMED).retain(|s| !Arc::ptr_eq(s, &self.state));
    }
}

/// Counts the operation if `path` is under an armed directory and says
/// whether it fails.
pub(crate) fn decide(path: &Path, op: FileOp) -> Option<Fault> {
    let state = {
        let armed = locked(&ARMED);
        if armed.is_empty() {
            return None;
        }
        armed.iter().find(|s| path.starts_with(&s.root)).cloned()?
    };
    let n = state.count.fetch_add(1, Ordering::SeqCst);
    let file = path
        .strip_prefix(&state.root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned();
    let seen = (op, file);
    locked(&state.seen).push(seen.clone());
    if state.healed.load(Ordering::SeqCst) {
        return None;
    }
    let fails = match state.plan.trigger {
        Trigger::Never => false,
        Trigger::Nth(at) => n == at,
        Trigger::From(at) => n >= at,
        Trigger::Random { per_mille, .. } => {
            let mut x = locked(&state.rng);
            // xorshift64: deterministic for a seed, no dependency.
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            *x % 1000 < u64::from(per_mille)
        }
    };
    if !fails {
        return None;
    }
    tracing::debug!(n, ?op, file = %seen.1, fault = ?state.plan.fault, "injecting a fault");
    locked(&state.failed).push((n, seen));
    Some(state.plan.fault)
}

//! Time, injectable so replays and tests control "now".

use std::sync::Mutex;

use chrono::{DateTime, Utc};

/// Where the engine reads the current time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock (default).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that says what it is told.
///
/// ```
/// use recall::{Clock, FixedClock};
/// let t = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().to_utc();
/// let clock = FixedClock::new(t);
/// clock.advance(chrono::Duration::days(3));
/// assert_eq!(clock.now(), t + chrono::Duration::days(3));
/// ```
#[derive(Debug)]
pub struct FixedClock {
    now: Mutex<DateTime<Utc>>,
}

impl FixedClock {
    /// A clock stopped at `now`.
    pub fn new(now: DateTime<Utc>) -> FixedClock {
        FixedClock {
            now: Mutex::new(now),
        }
    }

    /// Moves the clock to `now`.
    pub fn set(&self, now: DateTime<Utc>) {
        if let Ok(mut guard) = self.now.lock() {
            *guard = now;
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: chrono::Duration) {
        if let Ok(mut guard) = self.now.lock() {
            *guard += by;
        }
    }
}

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        match self.now.lock() {
            Ok(guard) => *guard,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }
}

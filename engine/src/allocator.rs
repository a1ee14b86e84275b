//! The allocator of the `recall` binary and of `recall-bench` (feature
//! `mimalloc`, on by default). The library never sets a global allocator:
//! a host that links it keeps its own.
//!
//! A bulk import allocates and frees millions of small strings and vectors,
//! which mimalloc does with less CPU than glibc's allocator. By default
//! mimalloc also returns pages it has not reused for a second to the
//! system, and an import keeps asking for them again: the kernel zeroes
//! each page it hands back, and a profile of a 1M-memory import spent 15 %
//! of its CPU in `clear_page_erms`. [`keep_freed_pages`] turns that off.
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOCATOR: recall::allocator::MiMalloc = recall::allocator::MiMalloc;
//!
//! fn main() {
//!     recall::allocator::keep_freed_pages();
//! }
//! ```

pub use mimalloc::MiMalloc;

/// mimalloc 3's `mi_option_purge_delay`: its place in `mi_option_e`
/// (mimalloc.h), for which libmimalloc-sys (pinned) exports no constant.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc's own purge delay, in ms: what [`ReturnFreedPages`] sets while
/// it lives.
const DEFAULT_PURGE_DELAY_MS: std::ffi::c_long = 1_000;

/// Tells mimalloc to keep the pages it frees for reuse instead of returning
/// them to the system. Call it first thing in `main`.
///
/// The trade, measured with `recall-bench scale --sizes 1000000` in two
/// back-to-back pairs: the import ran at 17.8k and 18.7k memories/s against
/// 16.4k and 17.1k, the whole run took 7 % less CPU (163–168 against
/// 176–181 CPU-s, 10–12 % less system time), and peak RSS rose from 7.0 to
/// 9.0 GiB: memory freed while the vector matrix grows stays with the
/// process.
pub fn keep_freed_pages() {
    // SAFETY: sets one integer option, which mimalloc reads when it next
    // considers purging; -1 is its documented "never purge".
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, -1) }
}

/// While it lives, mimalloc returns pages nobody reused for a second to the
/// system (its default); when dropped, it returns what is still free at
/// once and puts the previous setting back. Hold it across
/// `Engine::open` in a process that called [`keep_freed_pages`]: the open
/// decodes the tables batch by batch and frees each batch once folded into
/// the state, and with freed pages kept those stayed resident as long as
/// the process lived (about 400 MiB at a million memories; see
/// docs/MEASUREMENTS.md).
///
/// ```no_run
/// # async fn demo() -> recall::Result<()> {
/// recall::allocator::keep_freed_pages();
/// let returning = recall::allocator::ReturnFreedPages::start();
/// let engine = recall::Engine::open(recall::Config::new("./recall-data")).await?;
/// drop(returning);
/// # Ok(()) }
/// ```
#[must_use = "freed pages are returned only while it lives"]
#[derive(Debug)]
pub struct ReturnFreedPages {
    previous: std::ffi::c_long,
}

impl ReturnFreedPages {
    /// Starts returning freed pages.
    pub fn start() -> ReturnFreedPages {
        // SAFETY: reads and sets one integer option.
        let previous = unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, DEFAULT_PURGE_DELAY_MS) };
        ReturnFreedPages { previous }
    }
}

impl Drop for ReturnFreedPages {
    fn drop(&mut self) {
        // SAFETY: returns free pages the program no longer holds (pages
        // freed while the option was -1 were never scheduled, which is why
        // a collection alone after the open returned nothing), then sets
        // one integer option.
        unsafe {
            libmimalloc_sys::mi_collect(true);
            libmimalloc_sys::mi_option_set(PURGE_DELAY, self.previous);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_set_is_the_purge_delay() {
        // mimalloc 3 purges after 1,000 ms unless told otherwise; no other
        // option has that default, so the constant names the right one.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads one integer option.
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) },
            1_000
        );
        keep_freed_pages();
        // SAFETY: as above.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) }, -1);
        // One test for both: the option is the process's.
        let returning = ReturnFreedPages::start();
        // SAFETY: as above.
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) },
            1_000
        );
        drop(returning);
        // SAFETY: as above.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) }, -1);
    }
}

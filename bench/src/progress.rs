//! Progress bars on stderr, for the long runs (imports, embedding, haystacks).

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar on stderr with a label, count, rate and ETA.
pub fn bar(len: u64, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(label.to_string());
    bar
}

//! Where the embedding model is found: the one search behind
//! [`ModelSource::Default`](crate::ModelSource::Default), the `recall` CLI
//! and the bench.
//!
//! An explicit setting is obeyed or refused, never silently replaced: a
//! `RECALL_MODEL_DIR` that names a directory without `model.onnx` is an
//! error ([`Error::ModelNotFound`]), not a fall-back to another copy of the
//! model that may be a different one.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The environment variable that names the model directory.
pub const MODEL_DIR_VAR: &str = "RECALL_MODEL_DIR";

/// The file whose presence makes a directory a model directory.
const MODEL_FILE: &str = "model.onnx";

/// The directories searched when no model directory is set, in order: the
/// working directory's `models/` and each of its ancestors', `models/`
/// beside the executable, then the source tree's `models/`.
///
/// ```
/// let dirs = recall::default_model_dirs();
/// assert!(dirs.iter().all(|d| d.ends_with("models")));
/// ```
pub fn default_model_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    // The working directory's ancestors come before the compile-time source
    // tree: a build cache shared by two checkouts can hold artifacts compiled
    // in the other one, whose baked-in path may no longer exist.
    if let Ok(cwd) = std::env::current_dir() {
        dirs.extend(cwd.ancestors().map(|dir| dir.join("models")));
    } else {
        dirs.push(PathBuf::from("models"));
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(parent) = exe.parent()
    {
        dirs.push(parent.join("models"));
    }
    dirs.push(PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models"
    )));
    dirs
}

/// The model directory: `$RECALL_MODEL_DIR` when set (an error if it holds
/// no model), else the first of [`default_model_dirs`] that holds one, else
/// `None` (the caller decides whether lexical-only is acceptable).
///
/// ```
/// // Whatever this machine holds, the answer is a directory with the model in it.
/// if let Ok(Some(dir)) = recall::find_model_dir() {
///     assert!(dir.join("model.onnx").exists());
/// }
/// ```
pub fn find_model_dir() -> Result<Option<PathBuf>> {
    let explicit = std::env::var_os(MODEL_DIR_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    choose_model_dir(explicit, &default_model_dirs(), |d| {
        d.join(MODEL_FILE).is_file()
    })
}

/// [`find_model_dir`] over given places: the decision, apart from the
/// environment and the disk.
fn choose_model_dir(
    explicit: Option<PathBuf>,
    defaults: &[PathBuf],
    holds_model: impl Fn(&Path) -> bool,
) -> Result<Option<PathBuf>> {
    if let Some(dir) = explicit {
        return if holds_model(&dir) {
            Ok(Some(dir))
        } else {
            Err(Error::ModelNotFound {
                dir,
                setting: MODEL_DIR_VAR,
            })
        };
    }
    Ok(defaults.iter().find(|d| holds_model(d)).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tests run in the crate's directory, so the workspace's `models/` is
    /// found through the working directory's parent, ahead of any path baked
    /// in at compile time.
    #[test]
    fn the_working_directorys_ancestors_are_searched_before_the_source_tree() {
        let cwd = std::env::current_dir().unwrap();
        let parent_models = cwd.parent().unwrap().join("models");
        let dirs = default_model_dirs();
        let found = dirs.iter().position(|d| *d == parent_models);
        let baked = dirs.iter().position(|d| d.ends_with("../models"));
        assert!(found.is_some(), "{dirs:?}");
        assert!(found < baked, "{dirs:?}");
    }

    #[test]
    fn an_explicit_directory_without_a_model_is_an_error_not_a_fall_back() {
        let defaults = vec![PathBuf::from("/a/models"), PathBuf::from("/b/models")];
        let has = |d: &Path| d == Path::new("/b/models") || d == Path::new("/set/here");
        let err = choose_model_dir(Some("/empty".into()), &defaults, has).unwrap_err();
        assert!(
            matches!(&err, Error::ModelNotFound { dir, setting } if dir == Path::new("/empty") && *setting == MODEL_DIR_VAR),
            "{err}"
        );
        assert!(err.to_string().contains("/empty"), "{err}");
        assert_eq!(
            choose_model_dir(Some("/set/here".into()), &defaults, has).unwrap(),
            Some(PathBuf::from("/set/here"))
        );
        // Unset: the first default that holds the model, or none.
        assert_eq!(
            choose_model_dir(None, &defaults, has).unwrap(),
            Some(PathBuf::from("/b/models"))
        );
        assert_eq!(choose_model_dir(None, &defaults[..1], has).unwrap(), None);
    }
}

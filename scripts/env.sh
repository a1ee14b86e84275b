# Sourced by the project's scripts: one cargo target dir outside the clone,
# shared by the demo, the tests and CI, so a second run is incremental.
export CARGO_TARGET_DIR="${RECALL_TARGET_DIR:-$HOME/.cache/recall/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
mkdir -p "$CARGO_TARGET_DIR"
# The MCP end-to-end test's Python (scripts/setup.sh installs it).
export RECALL_MCP_PYTHON="${RECALL_MCP_PYTHON:-${RECALL_MCP_VENV:-$HOME/.cache/recall/mcp-venv}/bin/python}"
# The object-storage tests' S3 servers (scripts/setup.sh installs them).
export RECALL_WEED="${RECALL_WEED:-${RECALL_S3_VENV:-$HOME/.cache/recall/s3-venv}/bin/weed}"
export RECALL_MOTO="${RECALL_MOTO:-${RECALL_S3_VENV:-$HOME/.cache/recall/s3-venv}/bin/moto_server}"

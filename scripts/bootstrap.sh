#!/usr/bin/env bash
# Installs what gnnstore runs with into a cache outside the clone, reused when present:
#   $GNNSTORE_CACHE/venv   the virtual environment (torch, PyG, LadybugDB, rocksdict, gRPC, ...)
# GNNSTORE_CACHE defaults to ~/.cache/gnnstore. Prints the venv's python on its last line.
# GNNSTORE_EXTRAS names the extras to install (default: test, everything the suite uses);
# `make demo` passes train (torch and PyG for the trainer). A venv with the test extra serves both.
# The test server's Neo4j jars are the test command's (scripts/test.sh): the demo needs none.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${GNNSTORE_CACHE:-$HOME/.cache/gnnstore}
venv=$cache/venv
mkdir -p "$cache"

if [ ! -x "$venv/bin/python" ]; then
  echo "[bootstrap] creating $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip >&2
fi

# Reinstall when pyproject.toml changed, the editable install points at another clone, or the
# extras asked for are not installed.
extras=${GNNSTORE_EXTRAS-test}
stamp="$venv/.gnnstore-stamp"
want="$(sha256sum "$root/pyproject.toml" | cut -c1-16) $root"
have=$(cat "$stamp" 2>/dev/null || true)
if [ "$have" != "$want test" ] && [ "$have" != "$want $extras" ]; then
  echo "[bootstrap] installing gnnstore${extras:+[$extras]} from $root" >&2
  "$venv/bin/pip" install -q -e "$root${extras:+[$extras]}" >&2
  echo "$want $extras" > "$stamp"
fi

echo "$venv/bin/python"

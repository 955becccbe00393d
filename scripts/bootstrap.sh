#!/usr/bin/env bash
# Installs what gnnstore runs with into a cache outside the clone, reused when present:
#   $GNNSTORE_CACHE/venv   the virtual environment (torch, PyG, LadybugDB, rocksdict, gRPC, ...)
# GNNSTORE_CACHE defaults to ~/.cache/gnnstore. Prints the venv's python on its last line.
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

# Reinstall when pyproject.toml changed or the editable install points at another clone.
stamp="$venv/.gnnstore-stamp"
want="$(sha256sum "$root/pyproject.toml" | cut -c1-16) $root"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[bootstrap] installing gnnstore[test] from $root" >&2
  "$venv/bin/pip" install -q -e "$root[test]" >&2
  echo "$want" > "$stamp"
fi

echo "$venv/bin/python"

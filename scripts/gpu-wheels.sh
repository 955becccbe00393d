#!/usr/bin/env bash
# Fetches, here, the wheels scripts/gpu-check.sh installs on a GPU machine that has no network:
# gnnstore itself (built from this checkout) and the packages its serving and client paths need
# that the machine's image lacks or holds in another version (its Python 3.12 has torch, PyG,
# numba, pyarrow, pandas, pytest). Into .whl/ (git-ignored), which travels with the checkout to
# that machine: keep it small (about 23 MB today; the machine takes 64 MiB in all).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$HOME/.cache/gnnstore/venv/bin/python}
cd "$root"
rm -rf .whl && mkdir .whl
leftovers=$(ls -d build gnnstore.egg-info 2>/dev/null || true)  # setuptools builds in the tree
if ! log=$("$python" -m build -q --wheel --outdir .whl . 2>&1); then echo "$log" >&2; exit 1; fi
[ -n "$leftovers" ] || rm -rf build gnnstore.egg-info
platforms=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64)
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]/#/--platform=}" -d .whl \
  ladybug==0.22.0 rocksdict==0.3.29 grpcio==1.85.1 grpcio-health-checking==1.85.1 "protobuf>=6" \
  neo4j==6.4.1 pytz  # the driver: tests/served.py imports the Neo4j store
du -sh .whl

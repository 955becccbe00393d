#!/usr/bin/env bash
# The prepared GPU check (python -m benchmarks.gpu): the CUDA tests, the loader's target row
# with the cache on the GPU against in memory on the GPU, and a GraphSAGE epoch through the
# server against in memory, as one table. Made for a GPU machine with Python 3.12, torch and
# PyG and no network: run scripts/gpu-wheels.sh where there is a network first, bring .whl/
# along with the checkout, then, there:  bash scripts/gpu-check.sh
# Installs the carried wheels into /tmp/gnnstore-site (ahead of the image's packages on
# PYTHONPATH) and passes its arguments to the benchmark. Without a GPU it runs the CPU half.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
site=/tmp/gnnstore-site
if ! compgen -G ".whl/gnnstore-*.whl" >/dev/null; then
  echo "no .whl/gnnstore-*.whl: run scripts/gpu-wheels.sh where there is a network, and carry .whl" >&2
  exit 2
fi
"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
"$python" - <<'PY'
from importlib.metadata import version
print(", ".join(f"{name} {version(name)}" for name in
                ("torch", "torch_geometric", "numba", "llvmlite", "numpy", "grpcio", "protobuf", "gnnstore")))
PY
exec "$python" -m benchmarks.gpu "$@"

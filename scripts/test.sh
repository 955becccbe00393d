#!/usr/bin/env bash
# Installs what the suite needs (scripts/bootstrap.sh) and runs the whole test suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh tests/stores -x`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=$("$root/scripts/bootstrap.sh" | tail -n 1)
cd "$root"
exec "$python" -m pytest -p no:cacheprovider "$@"

#!/usr/bin/env bash
# Installs what the suite needs (scripts/bootstrap.sh, the Neo4j jars of the locally started test
# server) and runs the whole test suite on GNNSTORE_TEST_WORKERS pytest-xdist workers (default 3:
# most tests wait on server processes, so a third worker fills the two cores' idle time),
# printing its 30 slowest tests. Extra arguments go to pytest, e.g. `scripts/test.sh tests/stores -x`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=$("$root/scripts/bootstrap.sh" | tail -n 1)
"$root/scripts/fetch_neo4j.sh" >&2
cd "$root"
exec "$python" -m pytest -p no:cacheprovider --durations=30 -n "${GNNSTORE_TEST_WORKERS:-3}" --dist load "$@"

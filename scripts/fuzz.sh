#!/usr/bin/env bash
# The long fuzz run: scripts/fuzz.sh [REQUESTS (default 20000)] [SEED (default: random)].
# Prints the counts (tried, crashes, hangs, wrong codes, canary failures, statuses).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seed=${2:-$RANDOM}
echo "fuzz seed $seed"
GNNSTORE_FUZZ_REQUESTS=${1:-20000} GNNSTORE_FUZZ_SEED=$seed \
    exec "$root/scripts/test.sh" tests/backend/test_fuzz.py -s -p no:randomly --timeout 0

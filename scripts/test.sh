#!/usr/bin/env bash
# Run the tests: first everything but the `perf` tests, then the `perf` tests alone.
# The README's test command and .ci/run call this, so a newcomer and CI test the same way.
#
#   bash scripts/test.sh                    the whole suite (about 20 minutes on 2 cores)
#   bash scripts/test.sh tests/decoding     extra arguments go to the first call only
#   bash scripts/test.sh -m "not slow"      a marker expression there is combined with "not perf"
#
# `perf` tests assert a wall-clock or memory threshold (pytest.ini), which a busy machine can
# miss, so they run apart from the rest, on a machine that is no longer running them. The second
# call runs even when the first fails; the script fails when either does.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

marks="not perf"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -m) marks="($2) and not perf"; shift 2 ;;
    -m*) marks="(${1#-m}) and not perf"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

.venv/bin/python -m pytest -q -m "$marks" "${args[@]}"
first=$?
.venv/bin/python -m pytest -q -m perf
second=$?

if [ "$first" -ne 0 ] || [ "$second" -ne 0 ]; then
  echo "error: tests failed (not perf: exit $first, perf: exit $second)" >&2
  exit 1
fi

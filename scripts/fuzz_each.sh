#!/bin/bash
# The fuzz tests, each in a fresh Python process, N at a time (scripts/test.sh's fuzz phase).
#
#   scripts/fuzz_each.sh REPORTS_DIR [N]     one JUnit file per test: REPORTS_DIR/fuzz-K.xml
#
# Why one process per test: each case's memory bound (tests/fuzzing.py) is the resident-set
# peak after malloc_trim, which costs microseconds in a small heap and ~50 ms in one that
# an earlier test grew; past 5 ms a process measures every later case with tracemalloc
# (3-7x slower). In shared xdist workers which tests met such a heap was work-stealing's
# luck: the same test took 124 s in one full run and 933 s in another (docs/benchmarks.md).
set -uo pipefail
reports=$1
jobs=${2:-2}
cd "$(dirname "$0")/.."
ids=$(.venv/bin/pytest --collect-only -q -m "fuzz and not slurm and not postgres" | grep '::')
[ -n "$ids" ] || { echo "fuzz_each: no fuzz test collected" >&2; exit 1; }
echo "$(wc -l <<<"$ids") fuzz tests, $jobs at a time"
# xargs exits 123 when any test failed; each failure prints its own log
nl -ba -w1 -s' ' <<<"$ids" | xargs -P "$jobs" -L 1 bash -c '
    log="$0/fuzz-$1.log"
    if nice -n 10 .venv/bin/pytest -q --junitxml="$0/fuzz-$1.xml" "$2" >"$log" 2>&1; then
        echo "passed $2 ($(tail -1 "$log" | grep -o "in [0-9.]*s"))"
    else
        echo "FAILED $2"; cat "$log"; exit 1
    fi' "$reports"

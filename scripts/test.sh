#!/usr/bin/env bash
# The whole test suite, from a fresh clone on a fresh Debian machine:
#   1. Python env (.venv): the built wheel with every extra the tests need; the README's
#      first command on the bare wheel,
#   2. static checks: ruff, mypy --strict, import contracts (lint-imports, docs/architecture.md),
#   3. unit, property, solver, adapter and store tests (no services),
#   4. PostgreSQL (Debian package, throwaway cluster) for the store tests on a real server,
#      (3 and 4 run while every suite's Slurm images are built in the background),
#   5. for each Slurm release in SLURM_SUITES: the suite's own compose Slurm cluster
#      (prefix slurmdefrag-test, ports 6830/55452: never a cluster a user started), the
#      live tests, teardown.
# Under CI=true a service that cannot be started fails the run (tests never skip it).
set -euo pipefail
cd "$(dirname "$0")/.."

SLURM_SUITES=${SLURM_SUITES:-"bookworm trixie s2511 forky"}
# bookworm (22.05) and trixie (24.11) run every live test; s2511 (25.11 built from source,
# with pyslurm) and forky (26.05) the new-suite core only (marker newsuite, see below).
export PYTHONDONTWRITEBYTECODE=1

step() { printf '\n=== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }

# pytest exits 5 when a selection holds no test; for a phase that may legitimately be
# empty that is not a failure.
REPORTS=$(mktemp -d)
PHASE=0
run_pytest() {
    local rc=0
    PHASE=$((PHASE + 1))
    .venv/bin/pytest --junitxml="$REPORTS/phase$PHASE.xml" "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then rc=0; fi
    return "$rc"
}

step "system packages"
# Lua + busted run the job_submit.lua unit tests outside Slurm; curl is used by the epilog;
# tmux is the real terminal of the `slurm-defrag top` tests; chromium (headless) loads
# the web page in its tests.
need=()
for pkg in lua5.1 lua5.4 lua-busted curl tmux chromium; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

step "python environment: the wheel, installed as a site installs it"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
PIP=(.venv/bin/pip -q --disable-pip-version-check)
"${PIP[@]}" install --upgrade pip
# The suite runs against the built wheel, not the source tree, so packaging mistakes (a
# module or data file left out, a dependency only the tree has) fail here.
rm -rf build/wheel
"${PIP[@]}" wheel --no-deps -w build/wheel .
WHEEL=$(ls build/wheel/slurm_defrag-*.whl)
"${PIP[@]}" install "$WHEEL[dev]"
# same version number as an earlier run: reinstall so this tree's code is what is tested
"${PIP[@]}" install --force-reinstall --no-deps "$WHEEL"

step "README's first command on the bare wheel (no extras)"
BARE=$(mktemp -d)
python3 -m venv "$BARE/venv"
"$BARE/venv/bin/pip" -q --disable-pip-version-check install "$WHEEL"
COLUMNS=200 "$BARE/venv/bin/slurm-defrag" frag --snapshot examples/course.json >"$BARE/frag.txt"
grep -q "falsely-starved (spatial)" "$BARE/frag.txt"
# the docs the systemd unit's Documentation= names, under the environment's prefix
test -f "$BARE/venv/share/doc/slurm-defrag/service.md"
rc=0; "$BARE/venv/bin/slurm-defrag" history --db "sqlite:///$BARE/h.db" --plot "$BARE/h.png" \
    2>"$BARE/err.txt" || rc=$?
grep -qF "pip install 'slurm-defrag[plot]'" "$BARE/err.txt" || { cat "$BARE/err.txt"; exit 1; }
[ "$rc" -ne 0 ]
rm -rf "$BARE"

step "ruff"
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
step "mypy --strict"
.venv/bin/mypy
step "import contracts"
.venv/bin/lint-imports

PREBUILD_PID=
cleanup() {
    if [ -n "$PREBUILD_PID" ]; then kill -- "-$PREBUILD_PID" 2>/dev/null || true; fi
    if [ -n "${SLURM_DEFRAG_TEST_PG_URL:-}" ]; then scripts/postgres.sh stop >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# The Slurm images of every suite, built in the background beside the tests without
# services (single-threaded): on a cold machine that is about 20 minutes (debootstrap of
# three Debian releases, Slurm 25.11 and pyslurm compiled), which would otherwise come
# after them. The builds are niced (docker/Dockerfile.source, docker/defrag/Dockerfile).
# Docker and debootstrap are installed first, in the foreground: apt must not run twice
# at once (postgres.sh installs PostgreSQL meanwhile). A failed build is only reported
# here: `cluster.sh up` builds again and fails the run with its own message.
if [ -x scripts/cluster.sh ] && [ -n "$SLURM_SUITES" ]; then
    step "Slurm images of $SLURM_SUITES: building in the background"
    scripts/cluster.sh tools
    PREBUILD_LOG=$REPORTS/prebuild.log
    set -m  # the builds get their own process group, so cleanup stops all of them
    (
        for suite in $SLURM_SUITES; do
            t0=$(date +%s)
            SLURM_SUITE=$suite scripts/cluster.sh build || exit 1
            echo "images of $suite built in $(( $(date +%s) - t0 )) s"
        done
    ) >"$PREBUILD_LOG" 2>&1 &
    PREBUILD_PID=$!
    set +m
fi

step "tests without services"
run_pytest -q -m "not slurm and not postgres"

if [ -x scripts/postgres.sh ]; then
    step "PostgreSQL"
    SLURM_DEFRAG_TEST_PG_URL=$(scripts/postgres.sh start)
    export SLURM_DEFRAG_TEST_PG_URL
    run_pytest -q -m postgres
fi

if [ -n "$PREBUILD_PID" ]; then
    step "waiting for the Slurm images"
    rc=0; wait "$PREBUILD_PID" || rc=$?
    PREBUILD_PID=
    grep -E "built in [0-9]+ s" "$PREBUILD_LOG" || true
    if [ "$rc" -ne 0 ]; then
        tail -n 30 "$PREBUILD_LOG"
        echo "building the images in the background failed ($rc): cluster.sh up builds again"
    fi
fi

if [ -x scripts/cluster.sh ]; then
    # The suite's own clusters: their own compose project, container names and host ports,
    # so a cluster a user started (prefix slurmdefrag, ports 6820/55432) is never touched,
    # and `down` at the end removes only what this run created.
    export CLUSTER_PREFIX=${TEST_CLUSTER_PREFIX:-slurmdefrag-test}
    export SLURMRESTD_PORT=${TEST_SLURMRESTD_PORT:-6830}
    export POSTGRES_PORT=${TEST_POSTGRES_PORT:-55452}
    for suite in $SLURM_SUITES; do
        step "Slurm cluster: $suite"
        export SLURM_SUITE=$suite
        start=$(date +%s)
        # also builds the slurm-defrag service image (docker/defrag) that the service
        # tests start their containers from (tests/e2e/service_container.py)
        scripts/cluster.sh up
        echo "cluster $suite up in $(( $(date +%s) - start )) s"
        rc=0
        # bookworm and trixie run every live test; any other suite only the new-suite core,
        # marker newsuite: cli/rest(/pyslurm) parity, one enforce end-to-end, one kill -9
        # fault case
        case $suite in
        bookworm | trixie) selection=slurm ;;
        *) selection="slurm and newsuite" ;;
        esac
        run_pytest -q -m "$selection" || rc=$?
        scripts/cluster.sh down || true
        [ "$rc" -eq 0 ] || exit "$rc"
    done
fi
step "done"
.venv/bin/python scripts/junit_total.py "$REPORTS"/*.xml

#!/usr/bin/env bash
# Containerized real-Slurm test cluster for slurm-defrag (see docker/README.md).
#
#   scripts/cluster.sh up        install docker if needed, start dockerd, build, start, wait
#   scripts/cluster.sh down      remove containers, network and volumes (keeps images)
#   scripts/cluster.sh status    containers + sinfo
#   scripts/cluster.sh exec CMD  run CMD in the slurmctld container (sbatch, scontrol, ...)
#   scripts/cluster.sh logs [SERVICE...]
#   scripts/cluster.sh build     (re)build the base image if missing, then the images
#   scripts/cluster.sh tools     only install docker/debootstrap if missing and start dockerd
#   scripts/cluster.sh defrag up|stop|logs   the slurm-defrag service container (compose
#                                profile "defrag"; `up` does not start it)
#   scripts/cluster.sh token [USER] [LIFESPAN]   print a JWT for slurmrestd (default root)
#   scripts/cluster.sh api       print the slurmrestd API version in use (e.g. v0.0.38)
#
# Environment: SLURM_SUITE=bookworm (Slurm 22.05, default) | trixie (Slurm 24.11) |
# forky (Slurm 26.05) |
# s2511 (Slurm 25.11.7 built from source on trixie, docker/Dockerfile.source; its tarball is
# taken from SLURM_VENDOR_DIR, default shared/vendor/slurm beside the repository, or with
# SLURM_TARBALL_URL + SLURM_SHA256 downloaded by the build at a site with internet);
# CLUSTER_PREFIX (slurmdefrag: containers <prefix>-<suite>-<service>, compose project
# <prefix>-<suite>; the test suite uses its own, slurmdefrag-test); DEBIAN_MIRROR;
# SLURMRESTD_PORT (6820); POSTGRES_PORT (55432); UP_TIMEOUT (300 s); COMPOSE_OVERRIDE;
# DEFRAG_MODE (dry-run|enforce) and DEFRAG_INTERVAL_S for `defrag up`: remembered per
# cluster (.cluster/<project>.env), so a restart after a crash keeps the mode it had.
set -euo pipefail

# Debian's docker.io client/daemon and docker-compose v1 live in /usr/bin; a newer,
# incompatible client may sit first on PATH in /usr/local/bin.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
DOCKER=/usr/bin/docker
COMPOSE=/usr/bin/docker-compose

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SLURM_SUITE=${SLURM_SUITE:-bookworm}
# A suite is a Debian release plus where its Slurm comes from: that release's packages, or
# (s2511) a release tarball compiled on it. The service image of a source suite also gets
# pyslurm from PyPI, compiled against that Slurm (pyslurm X.Y builds only against Slurm X.Y).
case $SLURM_SUITE in
s2511)
    DEBIAN_SUITE=trixie SLURM_FROM=source SLURM_SOURCE_VERSION=25.11.7
    PYSLURM_REQUIREMENT='pyslurm==25.11.*' ;;
*)  DEBIAN_SUITE=$SLURM_SUITE SLURM_FROM=debian SLURM_SOURCE_VERSION= PYSLURM_REQUIREMENT= ;;
esac
export DEBIAN_SUITE SLURM_FROM PYSLURM_REQUIREMENT
export BASE_IMAGE=slurm-defrag-base:$DEBIAN_SUITE
if [ "$SLURM_FROM" = source ]; then
    export SLURM_BASE_IMAGE=slurm-defrag/slurm-source:$SLURM_SOURCE_VERSION
else
    export SLURM_BASE_IMAGE=$BASE_IMAGE
fi
export SLURMRESTD_PORT=${SLURMRESTD_PORT:-6820}
export POSTGRES_PORT=${POSTGRES_PORT:-55432}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
export CLUSTER_PREFIX=${CLUSTER_PREFIX:-slurmdefrag}
PROJECT=$CLUSTER_PREFIX-$SLURM_SUITE
# What `defrag up` was last started with, for this cluster only (removed by `down`).
DEFRAG_STATE=$ROOT/.cluster/$PROJECT.env
CTLD=$PROJECT-slurmctld
NODES=(node01 node02 node03 node04)
UP_TIMEOUT=${UP_TIMEOUT:-300}

log() { echo "[cluster $(date +%T)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# COMPOSE_OVERRIDE: one more compose file on top (bench/slurm_scale_bench.py: 128 nodes).
compose() {
    (cd "$ROOT" && "$COMPOSE" -p "$PROJECT" -f docker-compose.yml \
        ${COMPOSE_OVERRIDE:+-f "$COMPOSE_OVERRIDE"} "$@")
}
ctld() { "$DOCKER" exec -i "$CTLD" "$@"; }

ensure_tools() {
    local missing=()
    [ -x "$DOCKER" ] || missing+=(docker.io)
    [ -x "$COMPOSE" ] || missing+=(docker-compose)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v curl >/dev/null || missing+=(curl)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    fi
}

ensure_dockerd() {
    "$DOCKER" info >/dev/null 2>&1 && return 0
    log "starting dockerd (log: /var/log/dockerd.log)"
    # own session: dockerd must outlive this script's process group (a caller that ends
    # its job by killing the group would take dockerd, and every container, with it)
    setsid nohup /usr/sbin/dockerd >>/var/log/dockerd.log 2>&1 </dev/null &
    for _ in $(seq 60); do
        "$DOCKER" info >/dev/null 2>&1 && return 0
        sleep 1
    done
    die "dockerd did not answer within 60 s; see /var/log/dockerd.log"
}

# No registry access: the base image is a debootstrap of the suite, imported once.
ensure_base_image() {
    "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1 && return 0
    local dir
    dir=$(mktemp -d /tmp/slurm-defrag-base.XXXXXX)
    # a suite newer than this host's debootstrap (forky on a bookworm host) bootstraps
    # with the sid script, which every debootstrap has and which fits any current suite
    local script=
    [ -e "/usr/share/debootstrap/scripts/$DEBIAN_SUITE" ] \
        || script=/usr/share/debootstrap/scripts/sid
    log "debootstrap $DEBIAN_SUITE -> $BASE_IMAGE (from $DEBIAN_MIRROR${script:+, script $script})"
    debootstrap --variant=minbase "$DEBIAN_SUITE" "$dir" "$DEBIAN_MIRROR" $script >"$dir.log" 2>&1 \
        || { tail -20 "$dir.log" >&2; die "debootstrap failed (full log: $dir.log)"; }
    # point-release fixes (e.g. Slurm 22.05.8-4+deb12uN) come from the security suite;
    # unstable has none
    case $DEBIAN_SUITE in
    sid|unstable) ;;
    *) echo "deb ${DEBIAN_MIRROR%/debian}/debian-security $DEBIAN_SUITE-security main" \
        >>"$dir/etc/apt/sources.list" ;;
    esac
    # A mirror that is a frozen snapshot serves Release files past their Valid-Until
    # (forky's were 27 days expired): apt would refuse them. The check guards against
    # replayed old indexes, which a throwaway test image need not fear.
    echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99no-check-valid-until"
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" -c . | "$DOCKER" import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
    rm -rf "$dir" "$dir.log"
}

# A source suite's Slurm: compiled once (docker/Dockerfile.source; the layers stay cached
# until the tarball, its checksum or the configure options change). The tarball is checked
# against SHA256SUMS of the vendor directory here and against SLURM_SHA256 in the build.
build_source_slurm() {
    local vendor=${SLURM_VENDOR_DIR:-$ROOT/../shared/vendor/slurm} name
    local args=(--build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "SLURM_VERSION=$SLURM_SOURCE_VERSION")
    local ctx=$ROOT/docker/vendor
    [ -d "$vendor" ] || vendor=/work/shared/vendor/slurm
    find "$ctx" -name 'slurm-*.tar.*' -delete
    if [ -n "${SLURM_TARBALL_URL:-}" ]; then
        [ -n "${SLURM_SHA256:-}" ] || die "SLURM_TARBALL_URL needs SLURM_SHA256 (the tarball's sha256)"
        args+=(--build-arg "SLURM_TARBALL_URL=$SLURM_TARBALL_URL" --build-arg "SLURM_SHA256=$SLURM_SHA256")
    else
        name=slurm-$SLURM_SOURCE_VERSION.tar.xz
        [ -f "$vendor/$name" ] || die "no $name in $vendor (set SLURM_VENDOR_DIR, or SLURM_TARBALL_URL + SLURM_SHA256)"
        (cd "$vendor" && grep " $name\$" SHA256SUMS | sha256sum -c --quiet -) \
            || die "$vendor/$name does not match $vendor/SHA256SUMS"
        args+=(--build-arg "SLURM_SHA256=$(awk -v n="$name" '$2 == n {print $1}' "$vendor/SHA256SUMS")")
        cp "$vendor/$name" "$ctx/"
    fi
    log "building Slurm $SLURM_SOURCE_VERSION from source -> $SLURM_BASE_IMAGE (cached after the first time)"
    "$DOCKER" build -q -f "$ROOT/docker/Dockerfile.source" "${args[@]}" -t "$SLURM_BASE_IMAGE" "$ROOT/docker" >/dev/null
    find "$ctx" -name 'slurm-*.tar.*' -delete
}

build() {
    ensure_tools; ensure_dockerd; ensure_base_image
    [ "$SLURM_FROM" = source ] && build_source_slurm
    log "building images (BASE_IMAGE=$BASE_IMAGE, Slurm from $SLURM_FROM: $SLURM_BASE_IMAGE)"
    # Two distinct images: slurm-defrag/slurm (every Slurm service shares it) and
    # slurm-defrag/postgres, built side by side; `up` then finds them and builds nothing.
    compose build --parallel slurmctld postgres
    build_defrag
}

# The service image is built FROM the Slurm image (same munge key and slurm.conf), so after
# it. pip inside the build must trust what this host trusts (a TLS-inspecting proxy in front
# of PyPI): the host's extra CA certificates go into the build context.
build_defrag() {
    local ca=$ROOT/docker/defrag/extra-ca f
    # Only what differs is touched: scripts/test.sh builds several clusters at once, and a
    # file deleted and copied back under another build's context would miss its cache.
    for f in "$ca"/*.crt; do
        [ -e "$f" ] && [ ! -e "/usr/local/share/ca-certificates/${f##*/}" ] && rm -f "$f"
    done
    for f in /usr/local/share/ca-certificates/*.crt; do
        [ -e "$f" ] && ! cmp -s "$f" "$ca/${f##*/}" && cp "$f" "$ca/"
    done
    log "building the slurm-defrag service image"
    compose --profile defrag build defrag
}

# Service containers (the compose one and the tests' one-offs) share slurmctld's network
# namespace: remove them before the cluster.
remove_defrag() {
    local ids
    mapfile -t ids < <("$DOCKER" ps -aq --filter "name=^$PROJECT-defrag")
    [ ${#ids[@]} -eq 0 ] || "$DOCKER" rm -f "${ids[@]}" >/dev/null
}

# The service's mode survives restarts: a mode given now is remembered, a restart without
# one takes the remembered mode (a crash must not turn an enforce service into dry-run and
# leave its open plan frozen until its TTL).
defrag_up() {
    local mode=${DEFRAG_MODE:-} interval=${DEFRAG_INTERVAL_S:-}
    if [ -f "$DEFRAG_STATE" ]; then
        local key value
        while IFS='=' read -r key value; do
            case $key in
                DEFRAG_MODE) [ -n "$mode" ] || mode=$value ;;
                DEFRAG_INTERVAL_S) [ -n "$interval" ] || interval=$value ;;
            esac
        done <"$DEFRAG_STATE"
    fi
    mode=${mode:-dry-run}; interval=${interval:-60}
    case $mode in dry-run|enforce) ;; *) die "DEFRAG_MODE=$mode: use dry-run or enforce" ;; esac
    case $interval in ''|*[!0-9]*) die "DEFRAG_INTERVAL_S=$interval: a whole number of seconds" ;; esac
    mkdir -p "$(dirname "$DEFRAG_STATE")"
    printf 'DEFRAG_MODE=%s\nDEFRAG_INTERVAL_S=%s\n' "$mode" "$interval" >"$DEFRAG_STATE"
    log "slurm-defrag service: mode $mode, interval ${interval}s (remembered in $DEFRAG_STATE)"
    export DEFRAG_MODE=$mode DEFRAG_INTERVAL_S=$interval
    compose --profile defrag up -d --no-deps defrag
}

# slurmrestd serves several API versions; pick the newest one that answers a ping.
api_version() {
    local tok v
    tok=$(token root 600)
    for v in v0.0.45 v0.0.44 v0.0.43 v0.0.42 v0.0.41 v0.0.40 v0.0.39 v0.0.38; do
        if curl -sf -o /dev/null -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $tok" \
            "http://127.0.0.1:$SLURMRESTD_PORT/slurm/$v/ping"; then
            echo "$v"; return 0
        fi
    done
    return 1
}

token() {
    ctld scontrol token "username=${1:-root}" "lifespan=${2:-86400}" | sed -n 's/^SLURM_JWT=//p'
}

# A node is "up" once its slurmd registered: idle on a fresh cluster; mix/alloc/drain
# also count when `up` is re-run on a cluster that is in use. Not up: unk, down, inval,
# fail, or a state with a flag suffix such as "*" (not responding).
wait_ready() {
    local t0=$SECONDS states up v
    log "waiting for ${#NODES[@]} registered (idle) nodes (timeout ${UP_TIMEOUT}s)"
    while :; do
        states=$(ctld sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)
        up=$(awk '$2 !~ /^(unk|down|inval|fail)/ && $2 ~ /^[a-z]+$/' <<<"$states" | wc -l)
        states=$(tr '\n' ' ' <<<"$states")
        [ "$up" -ge "${#NODES[@]}" ] && break
        [ $((SECONDS - t0)) -ge "$UP_TIMEOUT" ] && die "nodes not up after ${UP_TIMEOUT}s: $states"
        log "  $((SECONDS - t0))s: ${states:-slurmctld not answering yet}"
        sleep 3
    done
    log "nodes up after $((SECONDS - t0))s: $states"
    # slurmctld only starts once slurmdbd has the accounting objects (entrypoint.sh)
    [ -n "$(ctld sacctmgr -n -P show assoc where cluster=defrag user=defrag format=user)" ] \
        || die "accounting (slurmdbd) is not set up; see: $0 logs slurmdbd"
    log "accounting ready: QOS $(ctld sacctmgr -n -P show qos format=name | paste -sd, -)," \
        "accounts $(ctld sacctmgr -n -P show account format=account | paste -sd, -)"
    until "$DOCKER" exec "$PROJECT-postgres" /usr/local/pgbin/pg_isready -q -h 127.0.0.1; do
        [ $((SECONDS - t0)) -ge "$UP_TIMEOUT" ] && die "postgres not ready"
        sleep 1
    done
    log "postgres ready on 127.0.0.1:$POSTGRES_PORT (defrag/defrag/defrag)"
    until v=$(api_version); do
        [ $((SECONDS - t0)) -ge "$UP_TIMEOUT" ] && die "slurmrestd not answering on :$SLURMRESTD_PORT"
        sleep 1
    done
    log "slurmrestd ready on http://127.0.0.1:$SLURMRESTD_PORT (API $v)"
}

cmd=${1:-status}
[ $# -gt 0 ] && shift
case "$cmd" in
up)
    t0=$SECONDS
    build
    log "starting project $PROJECT"
    compose up -d
    wait_ready
    log "cluster $PROJECT up in $((SECONDS - t0))s; try: scripts/cluster.sh exec sinfo"
    ;;
down)     ensure_dockerd; remove_defrag; compose down -v --remove-orphans; rm -f "$DEFRAG_STATE" ;;
build)    build ;;
tools)    ensure_tools; ensure_dockerd ;;
status)   compose ps; ctld sinfo -N -o '%N %t %G %P' || true ;;
logs)     compose logs --no-color "$@" ;;
exec)     [ $# -gt 0 ] || die "usage: $0 exec CMD..."
          if [ -t 0 ]; then "$DOCKER" exec -it "$CTLD" "$@"; else ctld "$@"; fi ;;
defrag)   case ${1:-up} in
          # --no-deps: never recreate slurmctld or postgres under running jobs
          up)   defrag_up ;;
          stop) compose --profile defrag stop defrag ;;
          logs) compose --profile defrag logs --no-color defrag ;;
          build) ensure_dockerd; build_defrag ;;
          *)    die "usage: $0 defrag up|stop|logs|build" ;;
          esac ;;
token)    token "$@" ;;
api)      api_version ;;
*)        die "unknown command '$cmd' (up|down|status|exec|logs|build|tools|defrag|token|api)" ;;
esac

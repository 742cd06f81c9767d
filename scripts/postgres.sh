#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests and benchmarks (no systemd, no Docker needed).
#
#   scripts/postgres.sh start   # install if missing, init, start; prints the URL on stdout
#   scripts/postgres.sh url     # prints the URL (server must be running)
#   scripts/postgres.sh status  # exit 0 if running
#   scripts/postgres.sh stop    # stop the server (data kept until `destroy`)
#   scripts/postgres.sh destroy # stop and delete the data directory
#
# Data in $PGDIR (default /tmp/slurm-defrag-pg), port $PGPORT (default 55433), trust auth on
# 127.0.0.1 only: never use this for anything but throwaway data. Logs go to stderr and
# $PGDIR/server.log; only the URL goes to stdout so callers can capture it.
set -euo pipefail

PGDIR=${PGDIR:-/tmp/slurm-defrag-pg}
PGPORT=${PGPORT:-55433}
DB=defrag
URL="postgresql+psycopg://${DB}@127.0.0.1:${PGPORT}/${DB}"
DATA="$PGDIR/data"

log() { echo "postgres.sh: $*" >&2; }

bindir() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
    [[ -n "$d" && -x "$d/pg_ctl" ]] && echo "$d"
}

as_pg() {
    # initdb and postgres refuse to run as root; the Debian package creates this user.
    if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

install() {
    [[ -n "$(bindir)" ]] && return 0
    [[ $(id -u) -eq 0 ]] || { log "postgresql is not installed and we are not root"; exit 1; }
    log "installing postgresql (Debian package)"
    export DEBIAN_FRONTEND=noninteractive
    # The package's postinst would create and start a system cluster we do not want.
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/no-main.conf
    apt-get install -y -q --no-install-recommends postgresql >&2 \
        || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends postgresql >&2; }
}

running() {
    local b; b=$(bindir) || return 1
    [[ -f "$DATA/PG_VERSION" ]] && as_pg "$b/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

start() {
    install
    local b; b=$(bindir)
    if running; then echo "$URL"; return 0; fi
    if [[ ! -f "$DATA/PG_VERSION" ]]; then
        mkdir -p "$PGDIR"
        [[ $(id -u) -eq 0 ]] && chown postgres:postgres "$PGDIR"
        log "initdb in $DATA"
        as_pg "$b/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=trust \
            -E UTF8 --locale=C.UTF-8 >&2
    fi
    log "starting on 127.0.0.1:$PGPORT"
    # Socket in $PGDIR: /run/postgresql may not exist without the system service.
    as_pg "$b/pg_ctl" -D "$DATA" -l "$PGDIR/server.log" -w -t 60 start \
        -o "-p $PGPORT -k $PGDIR -c listen_addresses=127.0.0.1" >&2 \
        || { tail -n 20 "$PGDIR/server.log" >&2; exit 1; }
    local psql=("$b/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -v ON_ERROR_STOP=1)
    if [[ -z $("${psql[@]}" -tAc "SELECT 1 FROM pg_roles WHERE rolname='$DB'") ]]; then
        # CREATEDB: tests create a scratch database each.
        "${psql[@]}" -c "CREATE ROLE $DB LOGIN CREATEDB" >&2
    fi
    if [[ -z $("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'") ]]; then
        "${psql[@]}" -c "CREATE DATABASE $DB OWNER $DB" >&2
    fi
    echo "$URL"
}

stop() {
    local b
    if b=$(bindir) && running; then
        as_pg "$b/pg_ctl" -D "$DATA" -m fast -w stop >&2
    else
        log "not running"
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    url) running || { log "not running: scripts/postgres.sh start"; exit 1; }; echo "$URL" ;;
    status) running ;;
    destroy) stop; rm -rf "$PGDIR" ;;
    *) echo "usage: $0 start|stop|url|status|destroy" >&2; exit 2 ;;
esac

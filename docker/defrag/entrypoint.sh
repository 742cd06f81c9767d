#!/bin/bash
# Entrypoint of the slurm-defrag service container (runs under tini).
#   defrag-entrypoint.sh slurm-defrag serve --config /etc/slurm-defrag/service.toml
#   defrag-entrypoint.sh <any command...>      (same preparation, then that command)
#
# 1. munged: the Slurm commands of the cli backend authenticate to slurmctld with munge;
#    the key is the cluster's (baked into the Slurm image this one is built from).
# 2. the database schema: `slurm-defrag db upgrade` on the URL the service will use
#    (TOML, then SLURM_DEFRAG_DB_URL), retried while PostgreSQL is still starting.
# 3. the command, as DEFRAG_USER (default `defrag`, AdminLevel=Operator in slurmdbd; use
#    root for what needs Admin: node drain/resume, node weights — docker/README.md).
#
# SLURM_DEFRAG_HOLDER_ID defaults to defrag-<random>: every container sharing slurmctld's
# network namespace is "slurmctld" with a small PID, so <hostname>:<pid> would not tell two
# instances apart in the leader lease.
set -euo pipefail

user=${DEFRAG_USER:-defrag}
config=/etc/slurm-defrag/service.toml

mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
rm -f /run/munge/munge.socket.2*   # left by a container stopped with kill -9
setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged
for _ in $(seq 50); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.1; done
[ -S /run/munge/munge.socket.2 ] || { echo "defrag-entrypoint: munged did not start" >&2; exit 1; }

export SLURM_DEFRAG_HOLDER_ID=${SLURM_DEFRAG_HOLDER_ID:-defrag-$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')}

# The per-job route's directory (a volume shared with slurmctld, docker-compose.yml): the
# service writes there, slurmctld (SlurmUser) reads.
if [ -d /var/lib/slurm-defrag/route ]; then
    chown "$user" /var/lib/slurm-defrag/route
    chmod 755 /var/lib/slurm-defrag/route
fi

# HOME too: matplotlib and friends write their caches there.
HOME=$(getent passwd "$user" | cut -d: -f6)
export HOME
as_user=(setpriv --reuid="$user" --regid="$user" --init-groups)

# The service's own settings loader resolves the URL (TOML < environment), so the schema
# is upgraded exactly where `serve` will look.
db_url=$(/opt/slurm-defrag/bin/python -c '
import sys
from pathlib import Path
from slurm_defrag.service.settings import load
print(load(Path(sys.argv[1]) if Path(sys.argv[1]).is_file() else None).db_url or "")
' "$config")
if [ -n "$db_url" ]; then
    for i in $(seq 60); do
        out=$("${as_user[@]}" slurm-defrag db upgrade --db "$db_url" 2>&1) && break
        [ "$i" -eq 60 ] && { echo "defrag-entrypoint: db upgrade failed: $out" >&2; exit 1; }
        sleep 1
    done
fi

exec "${as_user[@]}" "$@"

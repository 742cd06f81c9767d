#!/bin/bash
# Entrypoint of the slurm-defrag test image (runs under tini).
#   entrypoint.sh slurmctld
#   entrypoint.sh slurmd [NODENAME]     (default: $SLURMD_NODENAME, else the hostname)
#   entrypoint.sh slurmrestd            (TCP :6820 with JWT + unix socket with local auth)
#   entrypoint.sh slurmdbd              (MariaDB + slurmdbd; creates the accounting objects)
#   entrypoint.sh <any command...>
# Every role starts its own munged first (the key is baked into the image).
set -euo pipefail

role=${1:-slurmctld}
[ $# -gt 0 ] && shift

start_munge() {
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged
    for _ in $(seq 50); do [ -S /run/munge/munge.socket.2 ] && return 0; sleep 0.1; done
    echo "entrypoint: munged did not start" >&2; exit 1
}

# Fake GPUs: gres.conf points File= at /dev/nvidia0-7. They only have to exist
# (never opened); a missing file would hang slurmd.
fake_gpus() {
    for i in 0 1 2 3 4 5 6 7; do
        [ -e /dev/nvidia$i ] || mknod -m 0666 /dev/nvidia$i c 195 $i
    done
}

# slurmctld drops nodes whose NodeHostname does not resolve when it starts, and Docker
# DNS knows a container only once it runs: wait (up to 60 s) for all node containers.
wait_node_dns() {
    local h
    for h in $(sed -n 's/^NodeName=.*NodeHostname=\([^ ]*\).*/\1/p' /etc/slurm/slurm.conf); do
        for _ in $(seq 120); do getent hosts "$h" >/dev/null && continue 2; sleep 0.5; done
        echo "entrypoint: warning: $h does not resolve; slurmctld will ignore it" >&2
    done
}

# slurmrestd's OpenAPI plugins (22.05: openapi/v0.0.36-38 + dbv0.0.36-38; 24.11 and 25.11:
# openapi/slurmctld + openapi/slurmdbd). The slurmdbd ones are fatal without slurmdbd,
# so they are left out when slurm.conf has no accounting_storage/slurmdbd. Plugin
# directory: /usr/lib/<triplet>/slurm-wlm for the Debian packages, /usr/lib/slurm for a
# build from source (docker/Dockerfile.source).
rest_plugins() {
    local f n out=() dbd=no
    grep -q '^AccountingStorageType=accounting_storage/slurmdbd' /etc/slurm/slurm.conf && dbd=yes
    for f in /usr/lib/*/slurm-wlm/openapi_*.so /usr/lib/slurm/openapi_*.so; do
        [ -e "$f" ] || continue   # the glob of the directory this install does not have
        n=$(basename "$f" .so); n=${n#openapi_}
        case "$dbd:$n" in no:db*|no:slurmdbd) continue ;; esac
        out+=("openapi/${n//_/.}")
    done
    (IFS=,; echo "${out[*]}")
}

# -- accounting ------------------------------------------------------------------------
# What bootstrap_accounting creates (idempotent; runs at every slurmdbd start):
#   cluster defrag; QOS normal (Priority=0, Slurm's default) and prod (Priority=100);
#   accounts research and prod, both allowing QOS normal,prod (default normal);
#   users root, alice, bob, carol, defrag in research (everyone's default account), root,
#   bob and carol also in prod; defrag has AdminLevel=Operator.
# slurmctld loads all of it when it starts and waits for the last object (defrag's
# association, created with its AdminLevel in one command): nothing may change after it,
# or slurmctld could miss the update.
CLUSTER=defrag
OPERATOR=defrag

# true when `sacctmgr show ENTITY ...` lists something
have() { [ -n "$(sacctmgr -n -P show "$@" 2>/dev/null)" ]; }
acct() { sacctmgr -i "$@" >/dev/null; }
# add_assoc USER ACCOUNT [OPTIONS...]: the user's association with ACCOUNT, if missing
add_assoc() {
    local u=$1 a=$2; shift 2
    have assoc where cluster="$CLUSTER" account="$a" user="$u" format=user \
        || acct add user "$u" Account="$a" Cluster="$CLUSTER" "$@"
}

start_mariadb() {
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
    mariadbd --user=mysql &
    mariadb_pid=$!
    for _ in $(seq 120); do
        mariadb-admin ping >/dev/null 2>&1 && return 0
        kill -0 "$mariadb_pid" 2>/dev/null || break
        sleep 0.5
    done
    echo "entrypoint: MariaDB did not start" >&2; exit 1
}

bootstrap_accounting() {
    local t0=$SECONDS a u
    until sacctmgr -n show cluster >/dev/null 2>&1; do
        [ $((SECONDS - t0)) -ge 180 ] && { echo "entrypoint: slurmdbd not answering" >&2; return 1; }
        sleep 1
    done
    have cluster "$CLUSTER" || acct add cluster "$CLUSTER"
    have qos prod || acct add qos prod Priority=100 Description="production: protected"
    for a in research prod; do
        have account "$a" || acct add account "$a" Cluster="$CLUSTER" Description="$a" \
            Organization=defrag
        acct modify account where name="$a" cluster="$CLUSTER" set QOS=normal,prod \
            DefaultQOS=normal || true   # "nothing modified" when already so
    done
    for u in alice bob carol; do add_assoc "$u" research DefaultAccount=research; done
    for u in root bob carol; do add_assoc "$u" prod; done
    add_assoc root research
    acct modify user where name=root set DefaultAccount=research || true
    # last: slurmctld's entrypoint waits for this association
    add_assoc "$OPERATOR" research DefaultAccount=research AdminLevel=Operator
    echo "entrypoint: accounting ready after $((SECONDS - t0))s (cluster $CLUSTER, QOS normal/prod, accounts research/prod)" >&2
}

# slurmctld registers with slurmdbd at start: wait (up to 300 s) until slurmdbd answers
# and bootstrap_accounting has finished (its last object exists).
wait_accounting() {
    local t0=$SECONDS
    until have assoc where cluster="$CLUSTER" user="$OPERATOR" format=user; do
        if [ $((SECONDS - t0)) -ge 300 ]; then
            echo "entrypoint: warning: no accounting after 300 s; starting slurmctld anyway" >&2
            return 0
        fi
        sleep 1
    done
    echo "entrypoint: slurmdbd ready after $((SECONDS - t0))s" >&2
}

# Containers may not unshare namespaces (no CAP_SYS_ADMIN): tell slurmrestd not to try.
rest_security=disable_unshare_sysv,disable_unshare_files

case "$role" in
slurmctld)
    start_munge; fake_gpus
    mkdir -p /var/spool/slurmctld
    chmod 1777 /jobs 2>/dev/null || true   # a volume made by an older image
    # A new controller (no saved state) numbers jobs from 1 again: output files left in
    # the volume by an earlier cluster would collide (another user's slurm-N.out cannot
    # be opened -> JobLaunchFailure), so remove them.
    [ -e /var/spool/slurmctld/job_state ] || rm -f /jobs/slurm-*.out
    wait_node_dns
    grep -q '^AccountingStorageType=accounting_storage/slurmdbd' /etc/slurm/slurm.conf \
        && wait_accounting
    exec /usr/sbin/slurmctld -D "$@"
    ;;
slurmd)
    node=${1:-${SLURMD_NODENAME:-$(uname -n)}}
    [ $# -gt 0 ] && shift
    start_munge; fake_gpus
    mkdir -p /var/spool/slurmd
    exec /usr/sbin/slurmd -D -N "$node" "$@"
    ;;
slurmrestd)
    start_munge
    mkdir -p /run/slurmrestd && chmod 0755 /run/slurmrestd
    # 1) unix socket, rest_auth/local, as root: `curl --unix-socket
    #    /run/slurmrestd/slurmrestd.sock http://x/slurm/<ver>/jobs` inside this container
    #    acts as root without a token. slurmrestd refuses root unless told not to check.
    #    Slurm 26.05 refuses disable_user_check (fatal: "should only be used for
    #    development"): there the socket's slurmrestd runs as the user `slurmrestd` and
    #    local auth accepts only that UID (`runuser -u slurmrestd -- curl --unix-socket ...`).
    if dpkg --compare-versions "$(dpkg-query -W -f='${Version}' slurmrestd)" lt 26; then
        SLURMRESTD_SECURITY=$rest_security,disable_user_check \
            /usr/sbin/slurmrestd -s "$(rest_plugins)" -a rest_auth/local unix:/run/slurmrestd/slurmrestd.sock &
    else
        chown slurmrestd: /run/slurmrestd
        SLURMRESTD_SECURITY=$rest_security setpriv --reuid=slurmrestd --regid=slurmrestd --init-groups \
            /usr/sbin/slurmrestd -s "$(rest_plugins)" -a rest_auth/local unix:/run/slurmrestd/slurmrestd.sock &
    fi
    # 2) TCP :6820, rest_auth/jwt, as the unprivileged user `slurmrestd` (slurmrestd
    #    refuses to listen as root or as SlurmUser). Clients send X-SLURM-USER-NAME and
    #    X-SLURM-USER-TOKEN (from `scontrol token`). SLURM_JWT=daemon makes it talk to
    #    slurmctld with auth/jwt instead of munge (else: "Rejecting thread config token").
    SLURM_JWT=daemon SLURMRESTD_SECURITY=$rest_security exec setpriv --reuid=slurmrestd --regid=slurmrestd --init-groups \
        /usr/sbin/slurmrestd -s "$(rest_plugins)" -a rest_auth/jwt "$@" 0.0.0.0:6820
    ;;
slurmdbd)
    start_munge
    start_mariadb
    /usr/sbin/slurmdbd -D "$@" &
    dbd_pid=$!
    trap 'kill -TERM $dbd_pid 2>/dev/null; wait $dbd_pid; kill -TERM $mariadb_pid; wait $mariadb_pid; exit 0' TERM INT
    bootstrap_accounting || { kill -TERM "$dbd_pid" "$mariadb_pid"; exit 1; }
    # slurmdbd (or MariaDB) ending ends the container
    wait -n "$dbd_pid" "$mariadb_pid" || true
    echo "entrypoint: slurmdbd or MariaDB exited" >&2
    kill -TERM "$dbd_pid" "$mariadb_pid" 2>/dev/null || true
    exit 1
    ;;
*)
    exec "$role" "$@"
    ;;
esac

#!/bin/bash
# Entrypoint of the slurm-defrag test image (runs under tini).
#   entrypoint.sh slurmctld
#   entrypoint.sh slurmd [NODENAME]     (default: $SLURMD_NODENAME, else the hostname)
#   entrypoint.sh slurmrestd            (TCP :6820 with JWT + unix socket with local auth)
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

# slurmrestd loads every OpenAPI plugin by default, and the slurmdbd ones are fatal
# without slurmdbd: list the others (22.05: openapi/v0.0.36-38; 24.11: openapi/slurmctld).
rest_plugins() {
    local f n out=()
    for f in /usr/lib/*/slurm-wlm/openapi_*.so; do
        n=$(basename "$f" .so); n=${n#openapi_}
        case "$n" in db*|slurmdbd) continue ;; esac
        out+=("openapi/${n//_/.}")
    done
    (IFS=,; echo "${out[*]}")
}

# Containers may not unshare namespaces (no CAP_SYS_ADMIN): tell slurmrestd not to try.
rest_security=disable_unshare_sysv,disable_unshare_files

case "$role" in
slurmctld)
    start_munge; fake_gpus
    mkdir -p /var/spool/slurmctld
    wait_node_dns
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
    SLURMRESTD_SECURITY=$rest_security,disable_user_check \
        /usr/sbin/slurmrestd -s "$(rest_plugins)" -a rest_auth/local unix:/run/slurmrestd/slurmrestd.sock &
    # 2) TCP :6820, rest_auth/jwt, as the unprivileged user `slurmrestd` (slurmrestd
    #    refuses to listen as root or as SlurmUser). Clients send X-SLURM-USER-NAME and
    #    X-SLURM-USER-TOKEN (from `scontrol token`). SLURM_JWT=daemon makes it talk to
    #    slurmctld with auth/jwt instead of munge (else: "Rejecting thread config token").
    SLURM_JWT=daemon SLURMRESTD_SECURITY=$rest_security exec setpriv --reuid=slurmrestd --regid=slurmrestd --init-groups \
        /usr/sbin/slurmrestd -s "$(rest_plugins)" -a rest_auth/jwt "$@" 0.0.0.0:6820
    ;;
*)
    exec "$role" "$@"
    ;;
esac

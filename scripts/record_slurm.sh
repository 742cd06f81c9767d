#!/usr/bin/env bash
# Record a Slurm release's real output for the adapters' offline tests.
#
#   SLURM_SUITE=forky scripts/record_slurm.sh OUTDIR [API...]
#
# Starts one throwaway container of slurm-defrag/slurm:$SLURM_SUITE (scripts/cluster.sh
# build) that runs the cluster of shared/slurm-recordings (README there): slurmctld, eight
# slurmd in multiple-slurmd mode, slurmrestd on a unix socket, with the configuration of
# tests/fixtures/slurm-24.11/config (ClusterName fakegpu, no slurmdbd), then makes the
# same cluster state (jobs 1-10, node07 drained, reservation defrag-demo on node08) and
# writes every command's stdout to OUTDIR/<command, spaces as _>.txt|.json, as the 22.05
# and 24.11 folders have it. REST files are slurmrestd_GET_slurm_<api>_<endpoint>.json for
# each API given (default: every version the ping answers, newest first, the newest in
# full and the others' nodes and jobs only). Same state as the older recordings, so the
# contract tests compare the releases with the same expected values.
set -euo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
DOCKER=/usr/bin/docker
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUITE=${SLURM_SUITE:?set SLURM_SUITE (the image slurm-defrag/slurm:<suite>)}
OUT=${1:?usage: $0 OUTDIR [API...]}
shift
CONF=$ROOT/tests/fixtures/slurm-24.11/config
NAME=${CLUSTER_PREFIX:-slurmdefrag}-$SUITE-record
BASE=/var/spool/slurm-demo/fakegpu   # the recorded cluster's paths (its slurm.conf)
SOCK=$BASE/run/rest/slurmrestd.sock

log() { echo "[record $(date +%T)] $*" >&2; }
in_c() { "$DOCKER" exec -e TZ=UTC -w "$BASE/jobs" "$NAME" "$@"; }
# one command's stdout into OUTDIR/<name>; a failing command keeps stderr + status
save() {
    local name=$1 rc=0; shift
    in_c "$@" >"$OUT/$name" 2>"$OUT/$name.stderr" || rc=$?
    if [ "$rc" -ne 0 ]; then
        { cat "$OUT/$name.stderr"; echo "exit status $rc"; } >"$OUT/${name%.*}.ERROR.txt"
        rm -f "$OUT/$name"
    fi
    rm -f "$OUT/$name.stderr"
}
# slurmrestd runs as the unprivileged user slurmrestd (26.05 refuses to run as root:
# SLURMRESTD_SECURITY=disable_user_check is fatal there), and rest_auth/local accepts
# only a client of its own UID: curl runs as that user too.
as_rest=(setpriv --reuid=slurmrestd --regid=slurmrestd --init-groups)
rest() { in_c "${as_rest[@]}" curl -s --unix-socket "$SOCK" "http://x$1"; }

mkdir -p "$OUT/config"
cp "$CONF"/*.conf "$OUT/config/"
"$DOCKER" rm -f "$NAME" >/dev/null 2>&1 || true
trap '"$DOCKER" rm -f "$NAME" >/dev/null 2>&1 || true' EXIT
log "container $NAME (slurm-defrag/slurm:$SUITE, hostname vm)"
"$DOCKER" run -d --name "$NAME" --hostname vm -v "$OUT/config:/etc/slurm-rec:ro" \
    "slurm-defrag/slurm:$SUITE" sleep infinity >/dev/null
# The recorded paths: munge socket, state, spool, jwt key, fake GPU devices, jobs dir.
"$DOCKER" exec "$NAME" bash -euc "
    mkdir -p $BASE/{munge/run,state,spool,run,log,jobs,etc,dev} /run/munge /var/lib/munge
    for i in 0 1 2 3 4 5 6 7; do mknod -m 0666 $BASE/dev/nvidia\$i c 195 \$i; done
    cp /etc/slurm-rec/*.conf /etc/slurm/
    rm -f /etc/slurm/slurmdbd.conf
    cp /etc/slurm/jwt_hs256.key $BASE/etc/jwt.key
    chown -R munge:munge $BASE/munge /run/munge /var/lib/munge
    setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --socket=$BASE/munge/run/munge.sock
    for i in \$(seq 50); do [ -S $BASE/munge/run/munge.sock ] && break; sleep 0.1; done
    ln -sf $BASE/munge/run/munge.sock /run/munge/munge.socket.2
    chmod 1777 $BASE/jobs
    mkdir -p $BASE/run/rest && chown slurmrestd: $BASE/run/rest"
"$DOCKER" exec -d "$NAME" /usr/sbin/slurmctld -D
for i in 1 2 3 4 5 6 7 8; do
    "$DOCKER" exec "$NAME" mkdir -p "$BASE/spool/node0$i"
    "$DOCKER" exec -d "$NAME" /usr/sbin/slurmd -D -N "node0$i"
done
for _ in $(seq 120); do
    [ "$(in_c sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$' || true)" -ge 16 ] && break
    sleep 1
done
in_c sinfo -N -o '%N %t' >&2
# plugins: every openapi plugin but the slurmdbd ones (no accounting here)
plugins=$(in_c bash -c 'for f in /usr/lib/*/slurm-wlm/openapi_*.so; do n=$(basename $f .so); n=${n#openapi_}; case $n in db*|slurmdbd) ;; *) printf "openapi/%s," "${n//_/.}";; esac; done')
"$DOCKER" exec -d -e SLURMRESTD_SECURITY=disable_unshare_sysv,disable_unshare_files \
    "$NAME" "${as_rest[@]}" /usr/sbin/slurmrestd -s "${plugins%,}" -a rest_auth/local "unix:$SOCK"

sb() { in_c env -i PATH=/usr/bin:/bin HOME=/root sbatch --parsable --requeue "$@" --wrap 'sleep 3600'; }
log "jobs 1-8"
sb -J jobA -w node01 --gres=gpu:4
sb -J n01-1gpu -w node01 --gres=gpu:1
sb -J n02-2gpu-a -w node02 --gres=gpu:2
sb -J n02-2gpu-b -w node02 --gres=gpu:a100:2
sb -J jobC -w node03 --gres=gpu:1
sb -J n03-3gpu -w node03 --gres=gpu:a100-80g:3
sb -J n04-8gpu -w node04 --gres=gpu:8
sb -J n05n06-2x2gpu -N2 -w node05,node06 --gres=gpu:2
for _ in $(seq 60); do
    [ "$(in_c squeue -h -t R -o %i | wc -l)" -ge 8 ] && break
    sleep 1
done
in_c scontrol update nodename=node07 state=drain reason="demo: GPU maintenance"
in_c scontrol create reservation reservationname=defrag-demo nodes=node08 starttime=now \
    duration=1-00:00:00 users=root flags=ignore_jobs
log "jobs 9-10 (pending)"
sb -J pend-8gpu -N1 --gres=gpu:8
sb -J held-3gpu -H --gres=gpu:3
in_c scontrol hold 10
sleep 8   # a scheduling pass: job 9 gets Reason=Resources
in_c squeue -o '%i %j %T %r' >&2

log "recording into $OUT"
save scontrol_--version.txt scontrol --version
save scontrol_show_config.txt scontrol show config
for what in node job; do
    save "scontrol_show_${what}_-d.txt" scontrol show "$what" -d
    save "scontrol_show_${what}_-d_-o.txt" scontrol show "$what" -d -o
done
for what in nodes jobs partitions reservations; do
    save "scontrol_show_${what}_--json.json" scontrol show "$what" --json
done
save scontrol_show_partition.txt scontrol show partition
save scontrol_show_reservation.txt scontrol show reservation
save scontrol_show_topology.txt scontrol show topology
save sinfo.txt sinfo
save sinfo_--json.json sinfo --json
save sinfo_-N_--json.json sinfo -N --json
save squeue.txt squeue
save squeue_--json.json squeue --json
save squeue_--noheader_--all_--states=all_--format=%A.txt squeue --noheader --all --states=all --format=%A
for j in $(seq 10); do save "squeue_--json_--jobs_$j.json" squeue --json --jobs "$j"; done

apis=("$@")
if [ ${#apis[@]} -eq 0 ]; then
    for v in v0.0.47 v0.0.46 v0.0.45 v0.0.44 v0.0.43 v0.0.42 v0.0.41 v0.0.40 v0.0.39 v0.0.38; do
        for _ in $(seq 20); do
            code=$(in_c "${as_rest[@]}" curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" \
                "http://x/slurm/$v/ping" || true)
            [ "$code" != 000 ] && break   # 000: slurmrestd not listening yet
            sleep 0.5
        done
        [ "$code" = 200 ] && apis+=("$v")
    done
fi
[ ${#apis[@]} -gt 0 ] || { "$DOCKER" logs "$NAME" 2>&1 | tail -20 >&2; echo "slurmrestd answers no version" >&2; exit 1; }
log "slurmrestd answers ${apis[*]}"
printf '%s\n' "${apis[@]}" >"$OUT/slurmrestd_api_versions.txt"
rest /openapi/v3 >"$OUT/slurmrestd_GET_openapi_v3.json"
newest=${apis[0]}
for v in "${apis[@]}"; do
    endpoints=(ping nodes jobs)
    [ "$v" = "$newest" ] && endpoints+=(partitions reservations $(printf 'job/%s ' $(seq 10)))
    for e in "${endpoints[@]}"; do
        rest "/slurm/$v/$e" >"$OUT/slurmrestd_GET_slurm_${v}_${e//\//_}.json"
    done
done
log "done: $(ls "$OUT" | wc -l) files"

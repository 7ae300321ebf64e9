#!/bin/bash
# Start munged, then the Slurm daemon for this container's role in the foreground, so the
# container's life is the daemon's life (a fatal config error stops the container and its log
# says why).
#
#   slurm-entrypoint controller      slurmctld
#   slurm-entrypoint node [NAME]     slurmd (node name: NAME, else $SLURM_NODENAME, else hostname)
#   slurm-entrypoint <command...>    anything else, e.g. bash
#
# SLURMCTLD_DAEMON=1 runs slurmctld as a daemon instead, and the container lives while a
# slurmctld process does: in the foreground (-D, not under systemd) a failed `scontrol
# reconfigure` kills slurmctld, while a daemon (or one under systemd, as sites run it) keeps
# the old config running -- the behaviour `generate --reconfigure` is tested against.
#
# FAKE_GPUS=N creates /dev/nvidia0..N-1 (NVIDIA) and /dev/dri/renderD128..128+N-1 (AMD's render
# nodes) as character devices (c 1 3, like /dev/null) so that gres.conf File= lines resolve;
# Slurm needs a char device there, a plain file is refused.
set -euo pipefail

start_munge() {
    mkdir -p /run/munge
    chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged --num-threads=2
}

make_fake_gpus() {
    local n="${FAKE_GPUS:-0}" i
    for ((i = 0; i < n; i++)); do
        [ -e "/dev/nvidia$i" ] || mknod "/dev/nvidia$i" c 1 3
    done
    if ((n > 0)); then
        mkdir -p /dev/dri
        for ((i = 0; i < n; i++)); do
            [ -e "/dev/dri/renderD$((128 + i))" ] || mknod "/dev/dri/renderD$((128 + i))" c 1 3
        done
    fi
}

role="${1:-node}"
case "$role" in
controller)
    start_munge
    mkdir -p /var/spool/slurmctld /var/log/slurm
    if [ "${SLURMCTLD_DAEMON:-0}" = 1 ]; then
        /usr/sbin/slurmctld -i ${SLURMCTLD_ARGS:-}
        while pgrep -x slurmctld >/dev/null; do sleep 1; done
        exit 1
    fi
    exec /usr/sbin/slurmctld -D -i ${SLURMCTLD_ARGS:-}
    ;;
node)
    start_munge
    make_fake_gpus
    mkdir -p /var/spool/slurmd /var/log/slurm
    name="${2:-${SLURM_NODENAME:-$(hostname)}}"
    exec /usr/sbin/slurmd -D -N "$name" ${SLURMD_ARGS:-}
    ;;
*)
    exec "$@"
    ;;
esac

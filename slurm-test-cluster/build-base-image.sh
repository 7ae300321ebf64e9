#!/usr/bin/env bash
# Build the Debian base images the test cluster's Dockerfile starts FROM, when they are neither
# present locally nor pullable (machines without a container registry).
#
#   build-base-image.sh [SUITE...]        SUITE: trixie (Slurm 24.11) | forky (Slurm 26.05)
#
# Result: a local image tagged debian:<suite>-slim, made with debootstrap --variant=minbase and
# `docker import`. Nothing is done for a tag that already exists or that `docker pull` fetches.
#
# Environment:
#   DEBIAN_MIRROR   mirror for debootstrap (default http://deb.debian.org/debian)
#   FORCE=1         rebuild even when the tag exists
#   NO_PULL=1       do not try `docker pull` first
#   WORKDIR         scratch directory for the chroots (default: a mktemp dir, removed at exit)
set -euo pipefail

MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITES=("$@")
[ ${#SUITES[@]} -gt 0 ] || SUITES=(trixie forky)

log() { printf '[build-base-image] %s\n' "$*" >&2; }

command -v docker >/dev/null || { log "docker CLI not found"; exit 1; }
docker info >/dev/null 2>&1 || { log "cannot reach the Docker daemon"; exit 1; }

SCRATCH="${WORKDIR:-$(mktemp -d /tmp/slurm-base.XXXXXX)}"
mkdir -p "$SCRATCH"
cleanup() { [ -n "${WORKDIR:-}" ] || rm -rf "$SCRATCH"; }
trap cleanup EXIT

# debootstrap script per suite: distributions newer than the host's debootstrap (forky on a
# bookworm host) are bootstrapped with the sid script, which works for any testing suite.
script_for() {
    local suite="$1" dir=/usr/share/debootstrap/scripts
    if [ -e "$dir/$suite" ]; then echo "$dir/$suite"; else echo "$dir/sid"; fi
}

build_one() {
    local suite="$1" tag="debian:$1-slim" root start
    if [ -z "${FORCE:-}" ] && docker image inspect "$tag" >/dev/null 2>&1; then
        log "$tag present, nothing to do"
        return 0
    fi
    if [ -z "${FORCE:-}" ] && [ -z "${NO_PULL:-}" ] && timeout 60 docker pull -q "$tag" >/dev/null 2>&1; then
        log "$tag pulled"
        return 0
    fi
    command -v debootstrap >/dev/null || { log "debootstrap not installed (apt-get install debootstrap)"; exit 1; }
    root="$SCRATCH/$suite"
    rm -rf "$root"
    start=$(date +%s)
    log "debootstrap $suite from $MIRROR"
    if ! debootstrap --variant=minbase "$suite" "$root" "$MIRROR" "$(script_for "$suite")" \
        >"$SCRATCH/$suite.log" 2>&1; then
        tail -n 30 "$SCRATCH/$suite.log" >&2
        log "debootstrap $suite failed"
        exit 1
    fi
    # Keep images small and apt fast: no caches, no docs the slim images would not have either.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" --numeric-owner -c . | docker import \
        -c 'CMD ["/bin/bash"]' -c 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
    rm -rf "$root"
    log "$tag built in $(( $(date +%s) - start )) s"
}

for suite in "${SUITES[@]}"; do
    build_one "$suite"
done

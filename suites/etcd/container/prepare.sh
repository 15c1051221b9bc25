#!/bin/sh
# Fills this build context (a copy the runner made) with what the image
# needs: Debian's `etcd` (apt-get install etcd-server), the shared
# libraries it links, and a static busybox, whose `wget` proves one member
# reaches another after a fault.
set -eu
etcd=$(command -v etcd || true)
[ -n "$etcd" ] || { echo "prepare.sh: no etcd on PATH (apt-get install etcd-server)" >&2; exit 1; }
case "$("$etcd" --version 2>/dev/null | head -n 1)" in
  "etcd Version: 3.4."*) ;;
  *) echo "prepare.sh: $etcd is not etcd 3.4 ($("$etcd" --version 2>&1 | head -n 1)): the suite speaks 3.4's JSON gateway" >&2; exit 1 ;;
esac
busybox=$(command -v busybox) || { echo "prepare.sh: no busybox on PATH (apt-get install busybox-static)" >&2; exit 1; }
if ldd "$busybox" >/dev/null 2>&1; then
  echo "prepare.sh: $busybox links shared libraries; the image needs the static one (apt-get install busybox-static)" >&2
  exit 1
fi
mkdir -p rootfs/bin rootfs/tmp rootfs/var/lib/etcd
cp "$etcd" rootfs/bin/etcd
cp "$busybox" rootfs/bin/busybox
# Every library `ldd` names, at the path it names, the loader included. A
# static etcd names none.
if ldd "$etcd" >/dev/null 2>&1; then
  ldd "$etcd" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | while read -r lib; do
    mkdir -p "rootfs$(dirname "$lib")"
    cp -L "$lib" "rootfs$lib"
  done
fi

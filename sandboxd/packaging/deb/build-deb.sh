#!/bin/sh
# Builds sandboxd_<version>_amd64.deb from built binaries:
#
#   sh sandboxd/packaging/deb/build-deb.sh SANDBOXD SANDBOXCTL OUT_DIR
#
# SANDBOXD and SANDBOXCTL are the executables (`cargo build -p sandboxd
# --release`, or debug: they are stripped here); the version is what
# `SANDBOXD --version` prints. Prints the path of the .deb on stdout.
# Needs dpkg-deb and dpkg-shlibdeps (Debian's `dpkg-dev`) and `strip`.
#
# The package installs /usr/bin/{sandboxd,sandboxctl}, the unit
# sandboxd.service (enabled and started by postinst), the system user
# `sandboxd` (systemd-sysusers), /etc/default/sandboxd (where it listens,
# extra arguments) and, made at install, the token in
# /etc/sandboxd/token.env.
set -eu

if [ $# -ne 3 ]; then
    echo "usage: build-deb.sh SANDBOXD SANDBOXCTL OUT_DIR" >&2
    exit 2
fi
sandboxd=$1 sandboxctl=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
for tool in dpkg-deb dpkg-shlibdeps strip; do
    command -v "$tool" >/dev/null || {
        echo "build-deb.sh: \`$tool\` is missing: install Debian's dpkg-dev and binutils" >&2
        exit 1
    }
done
for exe in "$sandboxd" "$sandboxctl"; do
    [ -x "$exe" ] || {
        echo "build-deb.sh: $exe is not an executable: build it with \`cargo build -p sandboxd\`" >&2
        exit 1
    }
done

# `sandboxd 0.1.0` -> `0.1.0`
version=$("$sandboxd" --version | awk '{print $2}')
case "$version" in
[0-9]*) ;;
*)
    echo "build-deb.sh: \`$sandboxd --version\` printed no version" >&2
    exit 1
    ;;
esac

mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/sandboxd-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
root=$work/root
install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" \
    "$root/usr/lib/sysusers.d" "$root/etc/default" "$root/usr/share/doc/sandboxd"
strip -o "$root/usr/bin/sandboxd" "$sandboxd"
strip -o "$root/usr/bin/sandboxctl" "$sandboxctl"
chmod 0755 "$root/usr/bin/sandboxd" "$root/usr/bin/sandboxctl"
install -m 0644 "$here/sandboxd.service" "$root/lib/systemd/system/sandboxd.service"
install -m 0644 "$here/sysusers.conf" "$root/usr/lib/sysusers.d/sandboxd.conf"
install -m 0644 "$here/default" "$root/etc/default/sandboxd"
install -m 0755 "$here/postinst" "$here/prerm" "$here/postrm" "$root/DEBIAN/"
echo /etc/default/sandboxd >"$root/DEBIAN/conffiles"
printf '%s\n' "sandboxd: the reference sandbox gateway of testkit." \
    "License: MIT OR Apache-2.0" >"$root/usr/share/doc/sandboxd/copyright"

# The shared libraries the binaries link, as Debian names their packages.
mkdir -p "$work/debian"
printf 'Source: sandboxd\n\nPackage: sandboxd\nArchitecture: amd64\n' >"$work/debian/control"
libs=$(cd "$work" && dpkg-shlibdeps -O -e"root/usr/bin/sandboxd" -e"root/usr/bin/sandboxctl" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
depends="systemd${libs:+, $libs}"

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: sandboxd
Version: $version
Architecture: amd64
Maintainer: testkit developers <testkit@localhost>
Installed-Size: $size
Depends: $depends
Section: net
Priority: optional
Description: reference sandbox gateway: real directories and process groups over HTTP
 sandboxd serves a small JSON API that creates sandboxes (a directory and
 the process groups run in it), runs commands and files in them, and
 deletes them; sandboxctl is its command line client. Installed as the
 systemd service sandboxd.service, running as the system user sandboxd.
CONTROL
(cd "$root" && find usr lib etc -type f -exec md5sum {} + >DEBIAN/md5sums)

deb=$out/sandboxd_${version}_amd64.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"

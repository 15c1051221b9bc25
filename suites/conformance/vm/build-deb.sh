#!/bin/sh
# [pod.vm] prepare, run by the runner in the suite dir: builds sandboxd's
# .deb into vm/debs/ (the installer `deb`), and puts its files into vm/bin/
# (the installer `binaries`; neither dir is committed: see vm/.gitignore),
# from the sandboxd and sandboxctl on PATH (the runner puts the ones it
# built first), with the repository's packaging,
# sandboxd/packaging/deb/build-deb.sh.
set -eu
sandboxd=$(command -v sandboxd) || { echo "build-deb.sh: no sandboxd on PATH (cargo build -p sandboxd)" >&2; exit 1; }
sandboxctl=$(command -v sandboxctl) || { echo "build-deb.sh: no sandboxctl on PATH (cargo build -p sandboxd)" >&2; exit 1; }
# Only this build's package is installed: an older one left here would be too.
rm -rf vm/debs
mkdir -p vm/debs
sh ../../sandboxd/packaging/deb/build-deb.sh "$sandboxd" "$sandboxctl" vm/debs
# The same files, unpackaged, for `--installer binaries` ([pod.vm.binaries]).
rm -rf vm/bin
mkdir -p vm/bin
strip -o vm/bin/sandboxd "$sandboxd"
packaging=../../sandboxd/packaging/deb
for file in sandboxd.service sysusers.conf default postinst; do
    cp "$packaging/$file" vm/bin/
done

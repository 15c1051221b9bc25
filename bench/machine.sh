#!/usr/bin/env bash
# The machine pod's bounds, measured (see bench/README.md, "machine"):
#
#   bench/run.sh machine                  # the three cases below
#   BENCH_MACHINE_FILTER='test(=x)' ...   # the suite's tests each run runs (default: one test)
#
# 1. image build from nothing: a run of suites/conformance --pod vm with an
#    empty image cache; its `up` phase holds the build (bound: 2 min).
# 2. boot with the image cached: the same run again; the `up` phase is the
#    boot, the install and the first healthy answer (bound: 20 s under TCG).
#    The run's own `up` line says how the time went (the image, KVM or TCG).
# 3. a SIGKILLed runner: a run killed once its machine is up; the time until
#    no QEMU of it runs and its overlay is gone (bound: 5 s).
#
# Needs what a machine pod needs (root, qemu-system-x86, qemu-utils,
# debootstrap, dpkg-dev, Debian's mirror). Builds the runner and sandboxd
# (the dev profile). Results go to stdout and bench/results/machine.txt.
set -Eeuo pipefail

bench_dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$bench_dir/.." && pwd)
results=$bench_dir/results
mkdir -p "$results"
work=$(mktemp -d)
filter=${BENCH_MACHINE_FILTER:-test(exec_returns_stdout_and_exit_zero)}
runner_pid=

cleanup() {
    if [ -n "$runner_pid" ]; then kill -KILL "$runner_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
cargo build --locked -p testkit-runner -p sandboxd --bins >"$results/machine.build.log" 2>&1
target=${CARGO_TARGET_DIR:-$root/target}
export PATH="$target/debug:$PATH"
export TESTKIT_PODS_DIR=$work/pods

# The `up` phase's seconds of the run whose results are in $1.
up_seconds() {
    python3 - "$1/verdict.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    v = json.loads(line)
    if v["phase"] == "up":
        print(f'{v["duration_ms"] / 1000:.1f} {v["verdict"]}')
        break
PY
}

out=$results/machine.txt
: >"$out"
say() { echo "$*" | tee -a "$out"; }

say "machine pod bounds, $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

export TESTKIT_MACHINE_CACHE=$work/cache
testkit-runner run suites/conformance --pod vm -E "$filter" --results "$work/cold" \
    >"$results/machine.cold.log" 2>&1 || true
read -r took verdict < <(up_seconds "$work/cold")
say "image build from nothing (up phase, build included): ${took} s ($verdict; bound 120 s)"

testkit-runner run suites/conformance --pod vm -E "$filter" --results "$work/warm" \
    >"$results/machine.warm.log" 2>&1 || true
read -r took verdict < <(up_seconds "$work/warm")
say "boot with the image cached (up phase): ${took} s ($verdict; bound 20 s)"
grep -o 'started pod [^;]*' "$work/warm/verdict.jsonl" | head -1 | tee -a "$out" || true

# A runner killed with its machine up: QEMU and the overlay gone within 5 s.
testkit-runner run suites/conformance --pod vm -E "$filter" --results "$work/killed" \
    >"$results/machine.killed.log" 2>&1 &
runner_pid=$!
qemu=
for _ in $(seq 1 1800); do
    for rec in "$TESTKIT_PODS_DIR"/*/pod.json; do
        [ -e "$rec" ] || continue
        if ! grep -q '"phase"' "$rec"; then
            qemu=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$rec")
            private=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["private_dir"])' "$rec")
        fi
    done
    [ -n "$qemu" ] && break
    sleep 0.1
done
if [ -z "$qemu" ]; then
    say "SIGKILLed runner: no machine came up (see $results/machine.killed.log)"
    exit 1
fi
kill -KILL "$runner_pid"
killed_at=$(date +%s.%N)
wait "$runner_pid" 2>/dev/null || true
runner_pid=
gone=
for _ in $(seq 1 300); do
    state=$(awk '{print $3}' "/proc/$qemu/stat" 2>/dev/null || echo gone)
    if { [ "$state" = gone ] || [ "$state" = Z ]; } && ! ls -d "$private"/testkit-machine-*/overlay.qcow2 >/dev/null 2>&1; then
        gone=$(python3 -c "import time; print(f'{time.time() - $killed_at:.2f}')")
        break
    fi
    sleep 0.05
done
say "SIGKILLed runner: QEMU and its overlay gone after ${gone:-more than 15} s (bound 5 s)"

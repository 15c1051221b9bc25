#!/usr/bin/env bash
# The harness benchmark: testkit's harness against `cargo test`'s defaults,
# side by side in one run. See bench/README.md for what is measured.
#
#   bench/run.sh                 # everything, about two minutes on 2 cores
#   BENCH_REPEAT=9 bench/run.sh  # more runs of the (short) trivial binaries
#
# Builds once (the dev profile, what `cargo test` uses), then runs each test
# binary the way `cargo test --test NAME` would after that build: directly,
# from the package folder, with no arguments. Results go to stdout and to
# bench/results/latest.txt; each binary's output to bench/results/NAME.log.
set -euo pipefail

bench_dir=$(cd "$(dirname "$0")" && pwd)
cd "$bench_dir"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$bench_dir/target}"
repeat=${BENCH_REPEAT:-5}
case $repeat in '' | *[!0-9]* | 0) echo "BENCH_REPEAT must be a positive integer, not '$repeat'" >&2; exit 64 ;; esac
results=$bench_dir/results
mkdir -p "$results"
work=$(mktemp -d)
server_pid=
run_ids=()

cleanup() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    # The records of the benchmark's own runs are not worth keeping.
    for id in "${run_ids[@]}"; do rm -rf "$CARGO_TARGET_DIR/testkit/runs/$id"; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in cargo jq; do
    command -v "$tool" >/dev/null || { echo "run.sh needs $tool on PATH" >&2; exit 2; }
done

# --- build once ---------------------------------------------------------------
echo "building (dev profile) into $CARGO_TARGET_DIR ..." >&2
build_start=$(date +%s)
cargo test --no-run --message-format=json-render-diagnostics >"$work/build.json"
build_s=$(($(date +%s) - build_start))
exe() {
    jq -r --arg name "$1" --arg kind "$2" \
        'select(.reason == "compiler-artifact" and .target.name == $name and .target.kind == [$kind])
         | .executable // empty' "$work/build.json" | tail -n 1
}
server_exe=$(exe slow-server bin)
for name in io_testkit io_tokio trivial_testkit trivial_std; do
    path=$(exe "$name" test)
    [[ -x $path ]] || { echo "no test binary for $name in cargo's output" >&2; exit 2; }
    printf -v "exe_$name" '%s' "$path"
done
[[ -x $server_exe ]] || { echo "no slow-server binary in cargo's output" >&2; exit 2; }

# --- the slow server ------------------------------------------------------------
"$server_exe" >"$work/server.out" 2>"$results/slow-server.log" &
server_pid=$!
port=
for _ in $(seq 100); do
    port=$(head -n 1 "$work/server.out" 2>/dev/null || true)
    [[ -n $port ]] && break
    kill -0 "$server_pid" 2>/dev/null || { echo "slow-server exited; see $results/slow-server.log" >&2; exit 2; }
    sleep 0.1
done
[[ -n $port ]] || { echo "slow-server printed no port within 10 s" >&2; exit 2; }
export BENCH_SERVER="127.0.0.1:$port"

# --- measuring ------------------------------------------------------------------
# measure NAME LOG: runs the binary NAME with no arguments; sets `wall` (s),
# `cpu` (user + system, s) and `rss` (peak resident set of the test process,
# KiB). CPU time says how much of a wall time is the machine's other load.
if [[ -x /usr/bin/time ]] && /usr/bin/time -f '%e' -o /dev/null true 2>/dev/null; then
    timer=gnu
elif command -v python3 >/dev/null; then
    timer=python
else
    echo "run.sh needs GNU time (/usr/bin/time) or python3 to measure peak memory" >&2
    exit 2
fi
seq_no=0
measure() {
    local name=$1 log=$2 path var="exe_$1" status=0
    path=${!var}
    seq_no=$((seq_no + 1))
    # Set as testkit-runner would, only so that this run's records can be
    # removed afterwards; the harness does the same work either way.
    local id epoch
    epoch=$(date +%s)
    printf -v id 'bench%s%02d' "${epoch: -7}" "$seq_no"
    run_ids+=("$id")
    if [[ $timer == gnu ]]; then
        TESTKIT_RUN_ID=$id /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$path" >"$log" 2>&1 || status=$?
        # GNU time prepends a line when the command fails.
        read -r wall user sys rss < <(tail -n 1 "$work/time")
        cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
    else
        TESTKIT_RUN_ID=$id python3 - "$path" >"$work/time" 2>>"$log" <<'EOF' || status=$?
import resource, subprocess, sys, time
start = time.monotonic()
code = subprocess.call([sys.argv[1]], stdout=sys.stderr, stderr=sys.stderr)
wall = time.monotonic() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{wall:.2f} {usage.ru_utime + usage.ru_stime:.2f} {usage.ru_maxrss}")
sys.exit(code)
EOF
        read -r wall cpu rss <"$work/time"
    fi
    if ((status != 0)); then
        echo "$name failed (exit $status); see $log" >&2
        exit 1
    fi
    records=-
    if [[ $name == *testkit ]]; then
        # One JSON line per test, in one file per test process.
        records=$(cat "$CARGO_TARGET_DIR/testkit/runs/$id/records"/*/*.jsonl 2>/dev/null | wc -l)
    fi
}

# expect_passed LOG N: the binary ran N tests and every one passed (a skipped
# or ignored test would make its harness look faster than it is).
expect_passed() {
    grep -q "test result: ok\. $2 passed; 0 failed; 0 ignored" "$1" || {
        echo "expected $2 passed tests in $1:" >&2
        tail -n 5 "$1" >&2
        exit 1
    }
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
max() { sort -n | tail -n 1; }

load_before=$(cut -d ' ' -f 1-3 /proc/loadavg)

echo "io_testkit: 200 tests x 10 sequential 100 ms requests ..." >&2
measure io_testkit "$results/io_testkit.log"
expect_passed "$results/io_testkit.log" 200
io_testkit_wall=$wall io_testkit_cpu=$cpu io_testkit_rss=$rss io_testkit_records=$records

echo "io_tokio: the same 200 as #[tokio::test] (about 100 s on 2 cores) ..." >&2
measure io_tokio "$results/io_tokio.log"
expect_passed "$results/io_tokio.log" 200
io_tokio_wall=$wall io_tokio_cpu=$cpu io_tokio_rss=$rss

# Short runs: alternate the two, several times, and keep the median wall time.
: >"$work/trivial_testkit" >"$work/trivial_std"
trivial_testkit_records=
for i in $(seq "$repeat"); do
    echo "trivial: run $i of $repeat ..." >&2
    for name in trivial_std trivial_testkit; do
        measure "$name" "$results/$name.log"
        expect_passed "$results/$name.log" 1000
        echo "$wall $rss $cpu" >>"$work/$name"
        [[ $name == trivial_testkit ]] && trivial_testkit_records=$records
    done
done
trivial_testkit_wall=$(cut -d ' ' -f 1 "$work/trivial_testkit" | median)
trivial_testkit_rss=$(cut -d ' ' -f 2 "$work/trivial_testkit" | max)
trivial_std_wall=$(cut -d ' ' -f 1 "$work/trivial_std" | median)
trivial_std_rss=$(cut -d ' ' -f 2 "$work/trivial_std" | max)
trivial_testkit_cpu=$(cut -d ' ' -f 3 "$work/trivial_testkit" | median)
trivial_std_cpu=$(cut -d ' ' -f 3 "$work/trivial_std" | median)
trivial_testkit_all=$(cut -d ' ' -f 1 "$work/trivial_testkit" | tr '\n' ' ')
trivial_std_all=$(cut -d ' ' -f 1 "$work/trivial_std" | tr '\n' ' ')

load_after=$(cut -d ' ' -f 1-3 /proc/loadavg)

# --- report ---------------------------------------------------------------------
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
{
    echo "testkit harness benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "machine: $(nproc) CPUs, $(uname -sr), $(rustc --version)"
    echo "profile: dev (cargo test's default), build step ${build_s} s; load average before ${load_before}, after ${load_after}"
    echo
    row() { printf '%-16s %-32s %9s %8s %10s %8s\n' "$@"; }
    row binary tests 'wall (s)' 'CPU (s)' 'peak RSS' records
    row io_testkit '200 x 1 s I/O, testkit' "$io_testkit_wall" "$io_testkit_cpu" "$(mib "$io_testkit_rss") MiB" "$io_testkit_records"
    row io_tokio '200 x 1 s I/O, #[tokio::test]' "$io_tokio_wall" "$io_tokio_cpu" "$(mib "$io_tokio_rss") MiB" -
    row trivial_testkit '1000 trivial, testkit' "$trivial_testkit_wall" "$trivial_testkit_cpu" "$(mib "$trivial_testkit_rss") MiB" "$trivial_testkit_records"
    row trivial_std '1000 trivial, #[test]' "$trivial_std_wall" "$trivial_std_cpu" "$(mib "$trivial_std_rss") MiB" -
    echo
    echo "trivial runs ($repeat each; wall and CPU above are medians, RSS the maximum)"
    echo "  wall testkit: ${trivial_testkit_all}"
    echo "  wall std:     ${trivial_std_all}"
    echo
    echo "io_testkit / 1 s critical path:     $(ratio "$io_testkit_wall" 1)   (target: within 2x)"
    echo "io_tokio / io_testkit:              $(ratio "$io_tokio_wall" "$io_testkit_wall")"
    echo "trivial_testkit / trivial_std:      $(ratio "$trivial_testkit_wall" "$trivial_std_wall")   (target: within 1.5x)"
    echo "peak RSS with 200 tests waiting:    $(mib "$io_testkit_rss") MiB (io_testkit)"
} | tee "$results/latest.txt"

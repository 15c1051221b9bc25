#!/usr/bin/env bash
# What traces cost: the I/O benchmark (200 tests x ten sequential 100 ms
# requests, testkit's defaults) with its requests sent through the pod's
# client, the slow server being the pod, run with TESTKIT_TRACE=off,
# retain-on-failure and on, alternating, side by side in one run. See
# bench/README.md.
#
#   bench/trace.sh                   # 5 rounds (about a minute)
#   BENCH_TRACE_REPEAT=9 bench/trace.sh
#
# Prints the median wall and CPU time of each policy and the ratios to
# `off`; writes them to bench/results/trace.txt.
set -Eeuo pipefail

bench_dir=$(cd "$(dirname "$0")" && pwd)
cd "$bench_dir"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$bench_dir/target}"
repeat=${BENCH_TRACE_REPEAT:-5}
case $repeat in '' | *[!0-9]* | 0) echo "BENCH_TRACE_REPEAT must be a positive integer, not '$repeat'" >&2; exit 64 ;; esac
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
    for id in "${run_ids[@]}"; do rm -rf "$CARGO_TARGET_DIR/testkit/runs/$id"; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "trace.sh: a command failed at line $LINENO" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in cargo jq; do
    command -v "$tool" >/dev/null || { echo "trace.sh needs $tool on PATH" >&2; exit 2; }
done

echo "building (dev profile) into $CARGO_TARGET_DIR ..." >&2
cargo test --no-run --test io_pod_testkit --message-format=json-render-diagnostics >"$work/build.json"
cargo build --bin slow-server --message-format=json-render-diagnostics >>"$work/build.json"
exe() {
    jq -r --arg name "$1" --arg kind "$2" \
        'select(.reason == "compiler-artifact" and .target.name == $name and .target.kind == [$kind])
         | .executable // empty' "$work/build.json" | tail -n 1
}
test_exe=$(exe io_pod_testkit test)
server_exe=$(exe slow-server bin)
[[ -x $test_exe && -x $server_exe ]] || { echo "no io_pod_testkit or slow-server in cargo's output" >&2; exit 2; }

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
# The slow server as the pod: its capabilities declared, so that connecting
# sends nothing.
printf '{"name": "slow", "base_url": "http://127.0.0.1:%s", "port": %s, "token": "bench-token-%s", "capabilities": []}\n' \
    "$port" "$port" "$RANDOM$RANDOM" >"$work/handle.json"

seq_no=0
# run POLICY: one run of io_pod_testkit; appends "wall cpu" to $work/POLICY.
run() {
    local policy=$1 id start end status=0
    seq_no=$((seq_no + 1))
    id="benchtr$(date +%s | tail -c 6)$((seq_no % 100))"
    run_ids+=("$id")
    start=$(date +%s.%N)
    TESTKIT_RUN_ID=$id TESTKIT_TRACE=$policy TESTKIT_POD_HANDLE=$work/handle.json \
        TESTKIT_SUITE_DIR=$bench_dir/trace \
        /usr/bin/time -f '%U %S' -o "$work/time" "$test_exe" >"$results/trace_$policy.log" 2>&1 || status=$?
    end=$(date +%s.%N)
    if ((status != 0)); then
        echo "io_pod_testkit with TESTKIT_TRACE=$policy failed (exit $status); see $results/trace_$policy.log" >&2
        exit 1
    fi
    grep -q "test result: ok\. 200 passed; 0 failed; 0 ignored" "$results/trace_$policy.log" || {
        echo "expected 200 passed tests in $results/trace_$policy.log" >&2
        exit 1
    }
    read -r user sys < <(tail -n 1 "$work/time")
    awk -v a="$start" -v b="$end" -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f %.2f\n", b - a, u + s }' >>"$work/$policy"
    # Under `on` every test keeps its trace; none under the others, all passing.
    local kept
    kept=$(find "$CARGO_TARGET_DIR/testkit/runs/$id" -name trace.json 2>/dev/null | wc -l)
    echo "$kept" >"$work/$policy.kept"
}

policies=(off retain-on-failure on)
for p in "${policies[@]}"; do : >"$work/$p"; done
for i in $(seq "$repeat"); do
    for p in "${policies[@]}"; do
        echo "TESTKIT_TRACE=$p: round $i of $repeat ..." >&2
        run "$p"
    done
done

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
{
    echo "trace benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'): io_pod_testkit, 200 tests x 10 requests of 100 ms through pod.client()"
    echo "machine: $(nproc) CPUs; load average $(cut -d ' ' -f 1-3 /proc/loadavg); $repeat rounds, alternating, medians"
    printf '%-20s %9s %8s %12s %s\n' TESTKIT_TRACE 'wall (s)' 'CPU (s)' 'traces kept' 'every wall (s)'
    for p in "${policies[@]}"; do
        printf '%-20s %9s %8s %12s %s\n' "$p" "$(cut -d ' ' -f 1 "$work/$p" | median)" \
            "$(cut -d ' ' -f 2 "$work/$p" | median)" "$(cat "$work/$p.kept")" "$(cut -d ' ' -f 1 "$work/$p" | tr '\n' ' ')"
    done
    off=$(cut -d ' ' -f 1 "$work/off" | median)
    echo "retain-on-failure / off (wall): $(ratio "$(cut -d ' ' -f 1 "$work/retain-on-failure" | median)" "$off")   (target: at most 1.02)"
    echo "on / off (wall):                $(ratio "$(cut -d ' ' -f 1 "$work/on" | median)" "$off")   (target: at most 1.05)"
} | tee "$results/trace.txt"

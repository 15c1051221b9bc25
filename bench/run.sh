#!/usr/bin/env bash
# The harness benchmark: testkit's harness against plain `#[test]` and
# `#[tokio::test]`, side by side in one run, under `cargo test` and under
# `cargo nextest run`, and the compile times. See bench/README.md.
#
#   bench/run.sh                          # everything, about ten minutes on 2 cores
#   bench/run.sh harness                  # only the harness's run-time cases (no compile, no
#                                         # 100 s io_tokio, no runner memory), a few minutes
#   BENCH_SIZES="250 1000" bench/run.sh   # the nextest sizes to run (default 250 1000 5000)
#   BENCH_REPEAT=9 bench/run.sh           # more runs of the short cargo-test binaries (default 5)
#   BENCH_NEXTEST_REPEAT=3 bench/run.sh   # runs of each nextest size (default 3)
#   BENCH_COMPILE_REPEAT=9 bench/run.sh   # rounds of the compile cases (default 5)
#   bench/run.sh runner-memory            # only the runner's peak RSS with a test printing 200 MB
#   BENCH_PRINT_MB=500 bench/run.sh runner-memory   # ... printing 500 MB
#   bench/run.sh history                  # only what recording and checking a history cost
#   bench/run.sh trace-size               # only one traced test's trace.json size and peak RSS,
#                                         # 3,000 requests with 16 KiB queries (target: under 5 MB)
#   BENCH_TRACE_REQUESTS=10000 bench/run.sh trace-size   # ... with 10,000 requests
#   bench/run.sh machine                  # only the machine pod's bounds (bench/machine.sh):
#                                         # image build, cached boot, a SIGKILLed runner
#
# Builds once (the dev profile, what `cargo test` uses). The `cargo test`
# cases run each test binary the way `cargo test --test NAME` would after
# that build: directly, from the package folder, with no arguments. The
# nextest cases run `cargo nextest run --test NAME`. The compile cases come
# last: they clean and rebuild this package's own crate. Results go to
# stdout and to bench/results/latest.txt; each run's output to
# bench/results/NAME.log.
set -Eeuo pipefail

bench_dir=$(cd "$(dirname "$0")" && pwd)
cd "$bench_dir"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$bench_dir/target}"
repeat=${BENCH_REPEAT:-5}
case $repeat in '' | *[!0-9]* | 0) echo "BENCH_REPEAT must be a positive integer, not '$repeat'" >&2; exit 64 ;; esac
nextest_repeat=${BENCH_NEXTEST_REPEAT:-3}
case $nextest_repeat in '' | *[!0-9]* | 0) echo "BENCH_NEXTEST_REPEAT must be a positive integer, not '$nextest_repeat'" >&2; exit 64 ;; esac
compile_repeat=${BENCH_COMPILE_REPEAT:-5}
case $compile_repeat in '' | *[!0-9]* | 0) echo "BENCH_COMPILE_REPEAT must be a positive integer, not '$compile_repeat'" >&2; exit 64 ;; esac
only=${1:-all}
case $only in
    all | runner-memory | harness | history | trace-size) ;;
    # The machine pod's bounds: a script of its own (it needs root and QEMU,
    # and is not part of `all`).
    machine) exec "$bench_dir/machine.sh" ;;
    *) echo "usage: bench/run.sh [harness | runner-memory | history | trace-size | machine]" >&2; exit 64 ;;
esac
trace_requests=${BENCH_TRACE_REQUESTS:-3000}
case $trace_requests in '' | *[!0-9]* | 0) echo "BENCH_TRACE_REQUESTS must be a positive integer, not '$trace_requests'" >&2; exit 64 ;; esac
print_mb=${BENCH_PRINT_MB:-200}
case $print_mb in '' | *[!0-9]* | 0) echo "BENCH_PRINT_MB must be a positive integer, not '$print_mb'" >&2; exit 64 ;; esac
read -r -a sizes <<<"${BENCH_SIZES:-250 1000 5000}"
for n in "${sizes[@]}"; do
    case $n in 250 | 1000 | 5000) ;; *) echo "BENCH_SIZES holds 250, 1000 or 5000, not '$n'" >&2; exit 64 ;; esac
done
((${#sizes[@]} > 0)) || { echo "BENCH_SIZES names no size" >&2; exit 64; }
results=$bench_dir/results
mkdir -p "$results"
work=$(mktemp -d)
server_pid=
busy_pid=
run_ids=()

cleanup() {
    # The compile cases edit two test files; put them back.
    for f in io_testkit io_tokio; do
        [[ -f $work/$f.rs.orig ]] && cp "$work/$f.rs.orig" "$bench_dir/tests/$f.rs"
    done
    busy_stop
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    # The records of the benchmark's own runs are not worth keeping.
    for id in "${run_ids[@]}"; do rm -rf "$CARGO_TARGET_DIR/testkit/runs/$id"; done
    rm -rf "$work"
}
# busy_start: a neighbour that forks short processes as fast as it can
# (`/bin/true` in a loop), as a build or another suite on the machine does:
# what testkit costs a test must not grow with it. busy_stop ends it.
busy_start() {
    (while :; do /bin/true; done) &
    busy_pid=$!
}
busy_stop() {
    if [[ -n $busy_pid ]]; then
        kill "$busy_pid" 2>/dev/null || true
        wait "$busy_pid" 2>/dev/null || true
        busy_pid=
    fi
}
trap cleanup EXIT
trap 'echo "run.sh: a command failed at line $LINENO" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in cargo jq; do
    command -v "$tool" >/dev/null || { echo "run.sh needs $tool on PATH" >&2; exit 2; }
done
cargo nextest --version >/dev/null 2>&1 || {
    echo "run.sh needs cargo-nextest: cargo install cargo-nextest --locked" >&2
    exit 2
}

# --- the runner's memory, with a test that prints a lot ---------------------------
# runner_memory: runs the `printer` test (BENCH_PRINT_MB megabytes to stdout,
# then a failure, so nextest reports the whole output in one event) under
# `testkit-runner run`, with testkit-runner and sandboxd built from this
# checkout (dev profile; BENCH_RUNNER names another testkit-runner, with a
# sandboxd beside it). Sets `runner_rss` (the runner's own peak RSS, KiB:
# the VmHWM of its process, read every 50 ms while it runs; the rusage of
# waited children would count nextest too, which holds the whole output),
# `runner_results` (the results folder, KiB) and `runner_dropped` (what the
# marker in the kept output says was dropped).
runner_memory() {
    local runner=${BENCH_RUNNER:-} out=$work/runner-memory status=0 pid kib
    if [[ -z $runner ]]; then
        echo "runner memory: building testkit-runner and sandboxd ..." >&2
        cargo build --manifest-path "$bench_dir/../Cargo.toml" -p testkit-runner -p sandboxd \
            >"$results/runner_memory_build.log" 2>&1 || {
            echo "building testkit-runner failed; see $results/runner_memory_build.log" >&2
            exit 2
        }
        runner=$CARGO_TARGET_DIR/debug/testkit-runner
    fi
    [[ -x $runner ]] || { echo "no testkit-runner at $runner" >&2; exit 2; }
    echo "runner memory: a test printing $print_mb MB, under testkit-runner run ..." >&2
    PATH="$(dirname "$runner"):$PATH" BENCH_PRINT_MB=$print_mb "$runner" run "$bench_dir" \
        -E 'binary(printer)' --results "$out" >"$results/runner_memory.log" 2>&1 &
    pid=$!
    runner_rss=0
    # A zombie has no VmHWM: the loop ends when the runner does.
    while kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) && [[ -n $kib ]]; do
        ((kib > runner_rss)) && runner_rss=$kib
        sleep 0.05
    done
    wait "$pid" || status=$?
    # The printer fails on purpose: anything but that one failure is no
    # measurement.
    if ((status != 1)) || ! grep -q '0 passed, 1 failed' "$results/runner_memory.log"; then
        echo "testkit-runner run (exit $status) did not fail the printer alone; see $results/runner_memory.log" >&2
        exit 1
    fi
    runner_results=$(du -sk "$out" | cut -f 1)
    runner_dropped=$(grep -o '… [0-9]* bytes dropped …' "$out/tests.events.jsonl" 2>/dev/null | head -n 1 | tr -dc '0-9' || true)
    if [[ -n $runner_dropped ]]; then
        runner_dropped="$runner_dropped bytes (the marker in tests.events.jsonl)"
    else
        runner_dropped="no marker in tests.events.jsonl: nothing was cut"
    fi
}
runner_memory_report() {
    echo "testkit-runner run, one test printing $print_mb MB (dev profile):"
    echo "  runner peak RSS:  $(awk -v k="$runner_rss" 'BEGIN { printf "%.1f", k / 1024 }') MiB (its own VmHWM; target: bounded, under 150 MiB)"
    echo "  results folder:   $(awk -v k="$runner_results" 'BEGIN { printf "%.1f", k / 1024 }') MiB"
    echo "  output dropped:   $runner_dropped"
}
if [[ $only == runner-memory ]]; then
    runner_memory
    {
        echo "testkit runner memory benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo "machine: $(nproc) CPUs, $(uname -sr), $(rustc --version)"
        runner_memory_report
    } | tee "$results/runner-memory.txt"
    exit 0
fi

if [[ $only == history ]]; then
    # Its own binary (src/bin/history-cost.rs); the numbers go to history.txt.
    cargo run --quiet --bin history-cost | tee "$results/history.txt"
    exit "${PIPESTATUS[0]}"
fi
# --- one traced test's trace size ------------------------------------------------
# trace_size: runs the `trace_size` test (one traced test making
# BENCH_TRACE_REQUESTS requests with 16 KiB queries to the slow server's
# `/fast`, the pod) and sets `trace_bytes` (its trace.json), `trace_rss`
# (the test process's peak RSS, KiB), `trace_kept`, `trace_trimmed` and
# `trace_dropped` (entries kept, kept trimmed, not kept, as the trace says).
trace_size() {
    local status=0 handle=$work/trace-handle.json trace port=
    echo "trace size: building trace_size and slow-server ..." >&2
    cargo test --no-run --test trace_size --message-format=json-render-diagnostics >"$work/trace-build.json"
    cargo build --bin slow-server --message-format=json-render-diagnostics >>"$work/trace-build.json"
    local test_exe server_exe
    test_exe=$(jq -r 'select(.reason == "compiler-artifact" and .target.name == "trace_size") | .executable // empty' "$work/trace-build.json" | tail -n 1)
    server_exe=$(jq -r 'select(.reason == "compiler-artifact" and .target.name == "slow-server") | .executable // empty' "$work/trace-build.json" | tail -n 1)
    [[ -x $test_exe && -x $server_exe ]] || { echo "no trace_size or slow-server in cargo's output" >&2; exit 2; }
    "$server_exe" >"$work/server.out" 2>"$results/slow-server.log" &
    server_pid=$!
    for _ in $(seq 100); do
        port=$(head -n 1 "$work/server.out" 2>/dev/null || true)
        [[ -n $port ]] && break
        sleep 0.1
    done
    [[ -n $port ]] || { echo "slow-server printed no port within 10 s" >&2; exit 2; }
    printf '{"name": "slow", "base_url": "http://127.0.0.1:%s", "port": %s, "token": "bench-token-%s", "capabilities": []}\n' \
        "$port" "$port" "$RANDOM$RANDOM" >"$handle"
    local id
    id="benchts$(date +%s | tail -c 8)"
    run_ids+=("$id")
    echo "trace size: one traced test, $trace_requests requests with 16 KiB queries ..." >&2
    TESTKIT_RUN_ID=$id TESTKIT_POD_HANDLE=$handle TESTKIT_SUITE_DIR=$bench_dir/trace \
        BENCH_TRACE_REQUESTS=$trace_requests \
        /usr/bin/time -f '%M' -o "$work/trace-time" "$test_exe" >"$results/trace_size.log" 2>&1 || status=$?
    if ((status != 0)) || ! grep -q 'test result: ok\. 1 passed' "$results/trace_size.log"; then
        echo "trace_size failed (exit $status); see $results/trace_size.log" >&2
        exit 1
    fi
    trace=$(find "$CARGO_TARGET_DIR/testkit/runs/$id" -name trace.json | head -n 1)
    [[ -f $trace ]] || { echo "trace_size kept no trace.json under $CARGO_TARGET_DIR/testkit/runs/$id" >&2; exit 1; }
    trace_bytes=$(stat -c %s "$trace")
    trace_rss=$(tail -n 1 "$work/trace-time")
    trace_kept=$(jq '.entries | length' "$trace")
    trace_trimmed=$(jq '.trimmed // 0' "$trace")
    trace_dropped=$(jq '.dropped // 0' "$trace")
}
if [[ $only == trace-size ]]; then
    trace_size
    {
        echo "testkit trace size benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo "machine: $(nproc) CPUs, $(uname -sr), $(rustc --version)"
        echo "one traced test, $trace_requests requests with 16 KiB queries (dev profile):"
        echo "  trace.json:       $(awk -v b="$trace_bytes" 'BEGIN { printf "%.2f", b / 1e6 }') MB (target: under 5 MB)"
        echo "  entries:          $trace_kept kept ($trace_trimmed of them trimmed), $trace_dropped dropped"
        echo "  test peak RSS:    $(awk -v k="$trace_rss" 'BEGIN { printf "%.1f", k / 1024 }') MiB"
    } | tee "$results/trace-size.txt"
    exit 0
fi

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
    # Set as testkit-runner would, only so that this run's records can be
    # removed afterwards; the harness does the same work either way.
    new_run_id
    if [[ $timer == gnu ]]; then
        # GNU time's own wall time has a resolution of 10 ms, a quarter of
        # the short runs: the clock around it gives milliseconds.
        local start end
        start=$(date +%s.%N)
        TESTKIT_RUN_ID=$id /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$path" >"$log" 2>&1 || status=$?
        end=$(date +%s.%N)
        # GNU time prepends a line when the command fails.
        read -r _ user sys rss < <(tail -n 1 "$work/time")
        wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
        cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
    else
        TESTKIT_RUN_ID=$id python3 - "$path" >"$work/time" 2>>"$log" <<'EOF' || status=$?
import resource, subprocess, sys, time
start = time.monotonic()
code = subprocess.call([sys.argv[1]], stdout=sys.stderr, stderr=sys.stderr)
wall = time.monotonic() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{wall:.3f} {usage.ru_utime + usage.ru_stime:.2f} {usage.ru_maxrss}")
sys.exit(code)
EOF
        read -r wall cpu rss <"$work/time"
    fi
    if ((status != 0)); then
        echo "$name failed (exit $status); see $log" >&2
        exit 1
    fi
    records=-
    if [[ $name == *testkit ]]; then records=$(record_count "$id"); fi
}

# new_run_id: sets `id` to a fresh run id, remembered for deletion.
new_run_id() {
    local epoch
    seq_no=$((seq_no + 1))
    epoch=$(date +%s)
    printf -v id 'bench%s%02d' "${epoch: -7}" "$((seq_no % 100))"
    run_ids+=("$id")
}

# record_count ID: the test records a run wrote (one JSON line per test).
record_count() {
    local dir=$CARGO_TARGET_DIR/testkit/runs/$1/records
    if [[ -d $dir ]]; then
        find "$dir" -name '*.jsonl' -exec cat {} + | wc -l
    else
        echo 0
    fi
}

# nextest NAME LOG ARGS...: `cargo nextest run --test NAME ARGS...`; sets
# `wall` (s, the whole command), `run_s` (nextest's own run time: the tests,
# without cargo's build check and the listing) and `records`. Fails unless
# every test passed and none was skipped.
nextest() {
    local name=$1 log=$2 status=0 n
    shift 2
    new_run_id
    local start end
    start=$(date +%s.%N)
    TESTKIT_RUN_ID=$id cargo nextest run --test "$name" --no-fail-fast --status-level fail \
        --final-status-level none --show-progress none "$@" >"$log" 2>&1 || status=$?
    end=$(date +%s.%N)
    wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
    if ((status != 0)); then
        echo "cargo nextest run --test $name failed (exit $status); see $log" >&2
        exit 1
    fi
    # "Summary [   1.234s] 250 tests run: 250 passed, 0 skipped"
    local summary
    summary=$(grep -E 'Summary \[ *[0-9.]+s\]' "$log" | tail -n 1)
    run_s=$(sed -E 's/.*Summary \[ *([0-9.]+)s\].*/\1/' <<<"$summary")
    n=$(sed -E 's/.*\] ([0-9]+) tests? run: ([0-9]+) passed.*/\1 \2/' <<<"$summary")
    if [[ $n != "$expect_n $expect_n" ]] || grep -qE '[1-9][0-9]* skipped' <<<"$summary"; then
        echo "expected ${expect_n} passed and none skipped in $log: $summary" >&2
        exit 1
    fi
    records=-
    if [[ $name == *testkit* ]]; then records=$(record_count "$id"); fi
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

# io_testkit once, or BENCH_REPEAT times with `harness` (the median).
: >"$work/io_testkit"
io_repeat=1
[[ $only == harness ]] && io_repeat=$repeat
for i in $(seq "$io_repeat"); do
    echo "io_testkit: 200 tests x 10 sequential 100 ms requests (run $i of $io_repeat) ..." >&2
    measure io_testkit "$results/io_testkit.log"
    expect_passed "$results/io_testkit.log" 200
    echo "$wall $cpu $rss" >>"$work/io_testkit"
    io_testkit_records=$records
done
io_testkit_wall=$(cut -d ' ' -f 1 "$work/io_testkit" | median)
io_testkit_cpu=$(cut -d ' ' -f 2 "$work/io_testkit" | median)
io_testkit_rss=$(cut -d ' ' -f 3 "$work/io_testkit" | max)
io_testkit_all=$(cut -d ' ' -f 1 "$work/io_testkit" | tr '\n' ' ')

io_tokio_wall=- io_tokio_cpu=- io_tokio_rss=0
if [[ $only == all ]]; then
    echo "io_tokio: the same 200 as #[tokio::test] (about 100 s on 2 cores) ..." >&2
    measure io_tokio "$results/io_tokio.log"
    expect_passed "$results/io_tokio.log" 200
    io_tokio_wall=$wall io_tokio_cpu=$cpu io_tokio_rss=$rss
fi

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

# The same pair again while a neighbour forks short processes.
busy_start
: >"$work/busy_testkit" >"$work/busy_std"
for i in $(seq "$repeat"); do
    echo "trivial, busy neighbour: run $i of $repeat ..." >&2
    for name in trivial_std trivial_testkit; do
        measure "$name" "$results/busy_$name.log"
        expect_passed "$results/busy_$name.log" 1000
        echo "$wall" >>"$work/busy_${name#trivial_}"
    done
done
# How fast it forks: the pids it was given over one second.
pid_a=$(awk '{ print $NF }' /proc/loadavg)
sleep 1
pid_b=$(awk '{ print $NF }' /proc/loadavg)
busy_forks=$((pid_b > pid_a ? pid_b - pid_a : 0))
busy_stop
busy_testkit_wall=$(median <"$work/busy_testkit")
busy_std_wall=$(median <"$work/busy_std")
busy_testkit_all=$(tr '\n' ' ' <"$work/busy_testkit")
busy_std_all=$(tr '\n' ' ' <"$work/busy_std")

# --- under nextest: one process per test ----------------------------------------
# Trivial tests at three sizes, both harnesses alternating, nextest's defaults
# (as many tests at once as CPUs).
for n in "${sizes[@]}"; do
    : >"$work/nx_testkit_$n" >"$work/nx_std_$n"
    for i in $(seq "$nextest_repeat"); do
        echo "nextest, $n trivial tests: run $i of $nextest_repeat ..." >&2
        for h in std testkit; do
            expect_n=$n
            nextest "sized_${h}_$n" "$results/nextest_${h}_$n.log"
            echo "$run_s $wall $records" >>"$work/nx_${h}_$n"
            if [[ $h == testkit ]]; then last_testkit_id=$id; fi
        done
    done
done

# The finishing step a plain nextest run of testkit tests needs for JUnit,
# timed on the largest size (what used to be done, growing, by every process).
report_s=-
runner_exe=$CARGO_TARGET_DIR/debug/testkit-runner
if [[ -x $runner_exe ]]; then
    start=$(date +%s.%N)
    "$runner_exe" report "$CARGO_TARGET_DIR/testkit/runs/$last_testkit_id" >"$results/report_last.log" 2>&1 || {
        echo "testkit-runner report failed; see $results/report_last.log" >&2
        exit 1
    }
    report_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
fi

# 200 x 1 s of I/O, both harnesses with the same settings (-j 256: every test
# at once), then testkit's with the conformance suite's shipped nextest config;
# alternating, BENCH_NEXTEST_REPEAT rounds, medians.
expect_n=200
shipped=$bench_dir/../suites/conformance/.config/nextest.toml
shipped_threads=$(sed -nE 's/^test-threads *= *([0-9]+).*/\1/p' "$shipped" | head -n 1)
: >"$work/nx_io_testkit" >"$work/nx_io_tokio" >"$work/nx_io_shipped"
for i in $(seq "$nextest_repeat"); do
    echo "nextest, 200 x 1 s I/O: run $i of $nextest_repeat ..." >&2
    nextest io_tokio "$results/nextest_io_tokio.log" -j 256
    echo "$run_s $wall" >>"$work/nx_io_tokio"
    nextest io_testkit "$results/nextest_io_testkit.log" -j 256
    echo "$run_s $wall" >>"$work/nx_io_testkit"
    nextest io_testkit "$results/nextest_io_shipped.log" --config-file "$shipped"
    echo "$run_s $wall" >>"$work/nx_io_shipped"
done
for v in testkit tokio shipped; do
    printf -v "nx_io_${v}_run" '%s' "$(cut -d ' ' -f 1 "$work/nx_io_$v" | median)"
    printf -v "nx_io_${v}_wall" '%s' "$(cut -d ' ' -f 2 "$work/nx_io_$v" | median)"
    printf -v "nx_io_${v}_all" '%s' "$(cut -d ' ' -f 1 "$work/nx_io_$v" | tr '\n' ' ')"
done

# One test process, started the way nextest starts it (`--exact NAME`,
# NEXTEST set), in a binary of 250 tests and in one of 5,000: what a process
# does before and after its one test must not grow with its binary. The mean
# of 100 sequential starts, three rounds alternating, the median round.
process_ms() {
    local path=$1 name=$2 start end
    start=$(date +%s.%N)
    for _ in $(seq 100); do
        NEXTEST=1 TESTKIT_RUN_ID=$id "$path" --exact "$name" >/dev/null 2>&1 || {
            echo "$path --exact $name failed" >&2
            exit 1
        }
    done
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", (b - a) * 10 }'
}
new_run_id
for h in std testkit; do
    for n in 250 5000; do
        path=$(exe "sized_${h}_$n" test)
        # The whole list first: a reader that stops early breaks the pipe.
        "$path" --list >"$work/list" 2>/dev/null
        first=$(sed -n 's/: test$//p' "$work/list" | sed -n 1p)
        [[ -n $first ]] || { echo "sized_${h}_$n lists no test" >&2; exit 1; }
        printf -v "proc_path_${h}_$n" '%s' "$path"
        printf -v "proc_name_${h}_$n" '%s' "$first"
        : >"$work/proc_${h}_$n"
    done
done
for i in 1 2 3; do
    echo "one test process at a time: round $i of 3 ..." >&2
    for n in 250 5000; do
        for h in std testkit; do
            pv="proc_path_${h}_$n" nv="proc_name_${h}_$n"
            process_ms "${!pv}" "${!nv}" >>"$work/proc_${h}_$n"
            echo >>"$work/proc_${h}_$n"
        done
    done
done
for h in std testkit; do
    for n in 250 5000; do
        printf -v "proc_${h}_$n" '%s' "$(median <"$work/proc_${h}_$n")"
    done
done

if [[ $only == all ]]; then
# --- compile times --------------------------------------------------------------
# The 200-test suites: this package's own crate from clean (its dependencies,
# testkit included, stay built), then an edit of one test: a test added to
# the file, built once, then its body changed and the rebuild timed. Both
# suites alternate, BENCH_COMPILE_REPEAT rounds; the medians are reported.
build_time() {
    local start
    start=$(date +%s.%N)
    cargo test --no-run --test "$1" >>"$results/compile.log" 2>&1 || {
        echo "building $1 failed; see $results/compile.log" >&2
        exit 1
    }
    awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'
}
edited_test() {
    if [[ $1 == io_testkit ]]; then
        printf '\n/// Edited.\n#[testkit::test]\nasync fn edited(_cx: &mut Cx) -> testkit::Result {\n    std::hint::black_box("%s");\n    Ok(())\n}\n' "$2"
    else
        printf '\n/// Edited.\n#[tokio::test]\nasync fn edited() {\n    std::hint::black_box("%s");\n}\n' "$2"
    fi
}
: >"$results/compile.log"
: >"$work/compile_io_testkit" >"$work/compile_io_tokio"
for i in $(seq "$compile_repeat"); do
    for name in io_testkit io_tokio; do
        echo "compile: $name from clean, then one test edited (round $i of $compile_repeat) ..." >&2
        cargo clean -p testkit-bench >>"$results/compile.log" 2>&1
        clean_s=$(build_time "$name")
        cp "tests/$name.rs" "$work/$name.rs.orig"
        { cat "$work/$name.rs.orig"; edited_test "$name" one; } >"tests/$name.rs"
        build_time "$name" >/dev/null
        { cat "$work/$name.rs.orig"; edited_test "$name" two; } >"tests/$name.rs"
        edit_s=$(build_time "$name")
        cp "$work/$name.rs.orig" "tests/$name.rs"
        rm "$work/$name.rs.orig"
        echo "$clean_s $edit_s" >>"$work/compile_$name"
    done
done
for name in io_testkit io_tokio; do
    printf -v "clean_$name" '%s' "$(cut -d ' ' -f 1 "$work/compile_$name" | median)"
    printf -v "edit_$name" '%s' "$(cut -d ' ' -f 2 "$work/compile_$name" | median)"
    printf -v "compile_all_$name" '%s' "$(tr '\n' ' ' <"$work/compile_$name")"
done

runner_memory
fi

load_after=$(cut -d ' ' -f 1-3 /proc/loadavg)

# --- report ---------------------------------------------------------------------
per_test() { awk -v s="$1" -v n="$2" 'BEGIN { printf "%.2f", s * 1000 / n }'; }
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
    [[ $only == all ]] && row io_tokio '200 x 1 s I/O, #[tokio::test]' "$io_tokio_wall" "$io_tokio_cpu" "$(mib "$io_tokio_rss") MiB" -
    row trivial_testkit '1000 trivial, testkit' "$trivial_testkit_wall" "$trivial_testkit_cpu" "$(mib "$trivial_testkit_rss") MiB" "$trivial_testkit_records"
    row trivial_std '1000 trivial, #[test]' "$trivial_std_wall" "$trivial_std_cpu" "$(mib "$trivial_std_rss") MiB" -
    echo
    echo "trivial runs ($repeat each; wall and CPU above are medians, RSS the maximum)"
    echo "  wall testkit: ${trivial_testkit_all}"
    echo "  wall std:     ${trivial_std_all}"
    echo "  io_testkit ($io_repeat): ${io_testkit_all}"
    echo "the same trivial pair while a neighbour forks short processes (about ${busy_forks} a second):"
    echo "  wall testkit: ${busy_testkit_all}"
    echo "  wall std:     ${busy_std_all}"
    echo
    echo "io_testkit / 1 s critical path:     $(ratio "$io_testkit_wall" 1)   (target: within 1.1x)"
    [[ $only == all ]] && echo "io_tokio / io_testkit:              $(ratio "$io_tokio_wall" "$io_testkit_wall")"
    echo "trivial_testkit / trivial_std:      $(ratio "$trivial_testkit_wall" "$trivial_std_wall")   (target: within 1.15x)"
    echo "  with the busy neighbour:          $(ratio "$busy_testkit_wall" "$busy_std_wall")   (target: within 1.15x, as without it)"
    echo "peak RSS with 200 tests waiting:    $(mib "$io_testkit_rss") MiB (io_testkit; target: at most 40 MiB)"
    echo
    echo "under cargo nextest run ($nextest_repeat runs of each size, medians; run = nextest's own time for the tests)"
    nrow() { printf '%-8s %10s %10s %12s %10s %10s %12s %8s %8s\n' "$@"; }
    nrow tests 'std run' 'std wall' 'std /test' 'tk run' 'tk wall' 'tk /test' ratio records
    for n in "${sizes[@]}"; do
        sr=$(cut -d ' ' -f 1 "$work/nx_std_$n" | median)
        sw=$(cut -d ' ' -f 2 "$work/nx_std_$n" | median)
        tr=$(cut -d ' ' -f 1 "$work/nx_testkit_$n" | median)
        tw=$(cut -d ' ' -f 2 "$work/nx_testkit_$n" | median)
        rec=$(cut -d ' ' -f 3 "$work/nx_testkit_$n" | tail -n 1)
        printf -v "per_std_$n" '%s' "$(per_test "$sr" "$n")"
        printf -v "per_tk_$n" '%s' "$(per_test "$tr" "$n")"
        ps_var="per_std_$n" pt_var="per_tk_$n"
        nrow "$n" "${sr}s" "${sw}s" "${!ps_var} ms" "${tr}s" "${tw}s" "${!pt_var} ms" "$(ratio "$tr" "$sr")" "$rec"
    done
    echo "  runs (nextest's time, s):"
    for n in "${sizes[@]}"; do
        echo "    $n std:     $(cut -d ' ' -f 1 "$work/nx_std_$n" | tr '\n' ' ')"
        echo "    $n testkit: $(cut -d ' ' -f 1 "$work/nx_testkit_$n" | tr '\n' ' ')"
    done
    echo "  (target: testkit within 1.15x of std at every size)"
    if [[ -n ${per_tk_250:-} && -n ${per_tk_5000:-} ]]; then
        echo "testkit per test, 5000 / 250:           $(ratio "$per_tk_5000" "$per_tk_250")   (target: within 1.2x; std: $(ratio "$per_std_5000" "$per_std_250"))"
    fi
    echo "testkit-runner report, ${sizes[-1]} records:    ${report_s} s (JUnit and summary, once, after the run)"
    echo
    echo "200 x 1 s I/O under nextest ($nextest_repeat runs each, medians)   run (s)  wall (s)"
    printf '  %-32s %7s %9s\n' "io_tokio, -j 256" "$nx_io_tokio_run" "$nx_io_tokio_wall"
    printf '  %-32s %7s %9s\n' "io_testkit, -j 256" "$nx_io_testkit_run" "$nx_io_testkit_wall"
    printf '  %-32s %7s %9s\n' "io_testkit, shipped config (-j $shipped_threads)" "$nx_io_shipped_run" "$nx_io_shipped_wall"
    echo "io_testkit / io_tokio, -j 256:          $(ratio "$nx_io_testkit_run" "$nx_io_tokio_run")   (target: within 1.15x)"
    echo "shipped config / 1 s critical path:     $(ratio "$nx_io_shipped_run" 1)   (target: within 2x)"
    echo "  runs (nextest's time, s):"
    echo "    io_tokio:   ${nx_io_tokio_all}"
    echo "    io_testkit: ${nx_io_testkit_all}"
    echo "    shipped:    ${nx_io_shipped_all}"
    echo
    echo "one test process, started as nextest starts it (ms, mean of 100, median of 3 rounds)"
    printf '  %-10s %10s %10s %8s\n' harness "250 tests" "5000 tests" growth
    printf '  %-10s %10s %10s %8s\n' '#[test]' "$proc_std_250" "$proc_std_5000" "$(ratio "$proc_std_5000" "$proc_std_250")"
    printf '  %-10s %10s %10s %8s\n' testkit "$proc_testkit_250" "$proc_testkit_5000" "$(ratio "$proc_testkit_5000" "$proc_testkit_250")"
    echo "  testkit's own share (testkit - #[test]): $(awk -v a="$proc_testkit_250" -v b="$proc_std_250" 'BEGIN { printf "%.2f", a - b }') ms at 250, $(awk -v a="$proc_testkit_5000" -v b="$proc_std_5000" 'BEGIN { printf "%.2f", a - b }') ms at 5000 (target: at most 0.5 ms)"
    [[ $only == all ]] || exit 0
    echo
    echo "compile, 200-test suite (s, medians of $compile_repeat rounds; dependencies with line tables only)"
    echo "                                    testkit  tokio::test  ratio"
    printf '  %-32s %7s %12s %6s\n' "this crate from clean" "$clean_io_testkit" "$clean_io_tokio" "$(ratio "$clean_io_testkit" "$clean_io_tokio")"
    printf '  %-32s %7s %12s %6s\n' "one test edited" "$edit_io_testkit" "$edit_io_tokio" "$(ratio "$edit_io_testkit" "$edit_io_tokio")"
    echo "  (targets: within 1.15x from clean, 1.2x edited)"
    echo "  rounds (clean edit), testkit: ${compile_all_io_testkit}"
    echo "  rounds (clean edit), tokio:   ${compile_all_io_tokio}"
    echo
    runner_memory_report
} | tee "$results/latest.txt"

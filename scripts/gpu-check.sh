#!/usr/bin/env bash
# The whole GPU check, in one command, for a machine with a CUDA GPU:
#   configure (Release, sm_90 unless CUDA_ARCH says otherwise), build everything, run every CTest
#   test (a skipped GPU test counts as a failure here), run every example, run compute-sanitizer
#   (memcheck with leak check, racecheck, synccheck, initcheck) over the GPU tests and examples,
#   optionally run the benchmarks and the compile-cost measurement (--bench), and print a short
#   summary last. Tests labelled gpu2 need two GPUs: with fewer they are left out (and the summary
#   says so); with two or more they run and must not skip either.
#
#   scripts/gpu-check.sh [--bench] [LOG_DIR]
# Environment: BENCH_FILTER (a Google Benchmark regex, e.g. 'paired/' for the overhead pairs only),
# BENCH_REPETITIONS (default 10), COMPILE_COST_HEADERS=1 to also time each header alone (slow),
# SKIP_SANITIZER=1 to leave compute-sanitizer out, SKIP_TESTS=1 to leave the CTest runs out (the
# sanitizers only), SANITIZER_TOOLS (a subset, e.g. "memcheck"; the summary lists the tools that
# ran), SANITIZER_JOBS (parallel sanitizer runs),
# SANITIZER_TIMEOUT (seconds per run, default 300), BUILD_TIMEOUT (seconds, default 300) for the
# build. CUDA_VISIBLE_DEVICES limits the GPUs counted, so CUDA_VISIBLE_DEVICES=0 on a two-GPU
# machine runs the one-GPU check.
# Full logs go to LOG_DIR (default: gpu-check-logs). Exits non-zero on any failure.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/common.sh"

bench=0
if [ "${1:-}" = "--bench" ]; then bench=1; shift; fi
logs=$(mkdir -p "${1:-$root/gpu-check-logs}" && cd "${1:-$root/gpu-check-logs}" && pwd)
build=${BUILD_DIR:-$root/build-gpu}
jobs=$(curt_jobs)
summary=()
failed=0

# step NAME COMMAND...: runs the command with its output in LOG_DIR/NAME.log and notes the result.
step() {
  local name=$1 start=$SECONDS result=PASS
  shift
  if ! "$@" >"$logs/$name.log" 2>&1; then
    result=FAIL
    failed=1
  fi
  summary+=("$(printf '%-44s %-4s %5ss' "$name" "$result" $((SECONDS - start)))")
  echo "[$result] $name ($((SECONDS - start)) s)"
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  nvcc --version | tail -n 2; } >"$logs/machine.txt" 2>&1

# Tests labelled gpu2 need two GPUs. With fewer they would only skip (a failure here), so they
# are left out of the CTest and sanitizer runs; with two or more they run like any GPU test.
# nvidia-smi -L prints one "GPU i: ..." line per GPU (and an indented line per MIG instance).
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then  # the devices CUDA will show, not the machine's
  visible=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
  [ "$visible" -lt "$gpus" ] && gpus=$visible
fi
gpu_labels=(-L 'gpu|examples')
if [ "$gpus" -lt 2 ]; then
  gpu_labels+=(-LE gpu2)
  gpu2_note="gpu2 tests: not run ($gpus GPU$([ "$gpus" -eq 1 ] || echo s))"
else
  gpu2_note="gpu2 tests: run ($gpus GPUs)"
fi

step configure cmake -S "$root" -B "$build" $(curt_generator_args) -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}"
# A compiler that hangs (seen once: cudafe++ on one test file) must not use up a GPU lease.
step build timeout "${BUILD_TIMEOUT:-300}" cmake --build "$build" -j "$jobs" $(curt_keep_going_args)

# Host-side tests in parallel; GPU tests and examples one at a time (some measure overlap).
# SKIP_TESTS=1 leaves them out: a second call on a machine still warm from the first, whose
# build is kept, then runs only the sanitizers (one call of both takes about 9 minutes).
if [ "${SKIP_TESTS:-0}" = 1 ]; then
  summary+=("$(printf '%-44s %-4s' 'ctest: skipped (SKIP_TESTS=1)' SKIP)")
else
  step ctest-host ctest --test-dir "$build" -LE 'gpu|examples' -j "$jobs" --output-on-failure
  step ctest-gpu ctest --test-dir "$build" "${gpu_labels[@]}" -V --output-on-failure
  if grep -q '\*\*\*Skipped' "$logs/ctest-gpu.log"; then
    summary+=("$(printf '%-44s %-4s' 'no GPU test skipped' FAIL)")
    echo "[FAIL] a GPU test or example was skipped on a GPU machine"
    failed=1
  fi
fi
summary+=("$gpu2_note")
echo "[note] $gpu2_note"

# The GPU executables, from CTest's own list.
ctest --test-dir "$build" "${gpu_labels[@]}" --show-only=json-v1 >"$logs/gpu-tests.json"
mapfile -t executables < <(python3 -c '
import json, sys
for test in json.load(open(sys.argv[1]))["tests"]:
    print(test["command"][0])' "$logs/gpu-tests.json")

# Under the sanitizer kernels are serialized: a test that can only pass with overlapping work
# is tagged [timing] and left out there (it ran above). Today's overlap test (PDL) needs no tag:
# it notices the sanitizer and checks everything but the overlap. Tests tagged [fault] crash a
# kernel on purpose (in a child process) and are left out too. A test tagged [no-TOOL] (memcheck,
# initcheck) is left out of that tool only: it uses graph node types that compute-sanitizer 13.0
# does not follow (graph allocations, memory nodes in child graphs, conditional nodes; seen with
# raw CUDA too, and the driver logs "Unsupported node type" under the sanitizer; docs/design.md,
# "What compute-sanitizer cannot see"). In one Catch2 test spec a series of tags is an AND, so
# "~[timing]~[fault]" is "neither [timing] nor [fault]" (v2 and v3); a comma would make it an
# OR, which lets both back in.
#
# racecheck itself crashes now and then (SIGSEGV on one of its own threads, in
# libsanitizer-collection.so; seen with raw CUDA programs too, about 1 run in 20 for a graph with
# a conditional node). A small preloaded handler prints the crashing thread's backtrace; when
# its first frame past libc is the sanitizer's, the run is repeated once and the summary says so.
preload=${LD_PRELOAD:-}
if cc -shared -fPIC -O1 -o "$logs/segv_backtrace.so" "$root/scripts/segv_backtrace.c" \
    >"$logs/segv_backtrace.log" 2>&1; then
  preload=$logs/segv_backtrace.so${preload:+:$preload}
fi
# A log folder used before (the default one is) must not lend this run its results.
rm -f "$logs"/sanitizer-*.reruns "$logs"/sanitizer-*.left-out "$logs"/sanitizer-*.log \
  "$logs"/sanitizer-*.result "$logs"/sanitizer-*.sanitizer-crash
sanitizer_crashed() {  # LOG: did the sanitizer, not the program, crash?
  grep -A4 '^\[segv_backtrace\]' "$1" | grep -v -e segv_backtrace -e 'libc\.so' | head -n 1 |
    grep -q libsanitizer-collection
}
sanitize() {
  local tool=$1 exe=$2 args=()
  # Tests provoke failing API calls on purpose; memcheck would count each as an error.
  [ "$tool" = memcheck ] && args+=(--leak-check full --report-api-errors no)
  local filter=()
  case "$exe" in
    */tests/gpu/*) filter=("~[timing]~[fault]~[no-$tool]") ;;
  esac
  # A hung run must not use up the GPU lease: SANITIZER_TIMEOUT seconds (default 300) each.
  LD_PRELOAD=$preload timeout -k 10 "${SANITIZER_TIMEOUT:-300}" compute-sanitizer --tool "$tool" "${args[@]}" --error-exitcode 86 "$exe" "${filter[@]}"
}
# Whole programs a tool does not run, per tool (examples have no tags; so are the NCCL programs,
# whose every test runs NCCL's kernels). Seen on the H200s with compute-sanitizer 13.0:
# - examples/graphs launches a conditional WHILE node, which memcheck, synccheck and initcheck do
#   not follow (the driver logs "Unsupported node type: d"; memcheck then reported reads of the
#   WHILE body's kernel "out of bounds" yet "inside the nearest allocation", and synccheck an
#   illegal address in it; the program passes without the tools and under racecheck);
# - NCCL's own kernels: initcheck reports uninitialized reads of NCCL's buffers inside
#   ncclDevKernel_* (93,687 in test_nccl, none in curt's kernels), synccheck divergent barriers
#   inside its RING_LL kernels (multi_gpu's all-reduce; test_nccl's broadcast, 2,464 of them,
#   after which the tool's abort of the kernel made NCCL fail "unspecified launch failure").
#   memcheck and racecheck run them.
# - racecheck on examples/graphs needs more host memory than the single-H200 machine has: it used
#   126,130 of 128,887 MiB and was killed after about 240 s (alone, 2026-12-01); it passes on
#   the two-H200 machine (256 GiB). Left out below 200 GiB of host memory.
declare -A programs_left_out=([memcheck]="graphs" [synccheck]="graphs multi_gpu test_nccl test_nccl_gpu2"
                              [initcheck]="graphs multi_gpu test_nccl test_nccl_gpu2")
if [ "$(awk '/MemTotal/ {print int($2 / 1048576)}' /proc/meminfo)" -lt 200 ]; then
  programs_left_out[racecheck]="graphs"
fi
# sanitize_once_more TOOL EXE LOG: sanitize, and repeat once after a crash of the sanitizer. A
# program whose every test is tagged [no-TOOL] (or a program listed above) is not run by that
# tool: noted, not passed.
sanitize_once_more() {
  if [[ " ${programs_left_out[$1]:-} " == *" $(basename "$2") "* ]]; then
    echo "$(basename "$2")" >>"$logs/sanitizer-$1.left-out"
    return 0
  fi
  sanitize "$1" "$2" >"$3" 2>&1 && return 0
  if grep -q '^No test cases matched' "$3"; then
    echo "$(basename "$2")" >>"$logs/sanitizer-$1.left-out"
    return 0
  fi
  sanitizer_crashed "$3" || return 1
  mv "$3" "$3.sanitizer-crash"
  echo "$(basename "$2")" >>"$logs/sanitizer-$1.reruns"
  sanitize "$1" "$2" >"$3" 2>&1
}
# All (tool, program) runs share one pool of SANITIZER_JOBS (default: a third of the cores, 4 to
# 10) on the GPU, the examples and the multi-GPU programs (the slowest) first; one summary line
# per tool.
if [ "${SKIP_SANITIZER:-0}" = 1 ]; then
  summary+=("$(printf '%-44s %-4s' 'compute-sanitizer: skipped (SKIP_SANITIZER=1)' SKIP)")
elif command -v compute-sanitizer >/dev/null 2>&1; then
  read -r -a tools <<< "${SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}"
  pool=${SANITIZER_JOBS:-$(( jobs / 3 < 4 ? 4 : (jobs / 3 > 10 ? 10 : jobs / 3) ))}
  mapfile -t ordered < <(printf '%s\n' "${executables[@]}" | grep -E '/examples/|nccl|gpu2')
  mapfile -t -O "${#ordered[@]}" ordered < <(printf '%s\n' "${executables[@]}" | grep -vE '/examples/|nccl|gpu2')
  start=$SECONDS
  for exe in "${ordered[@]}"; do
    [ -n "$exe" ] || continue
    for tool in "${tools[@]}"; do
      while [ "$(jobs -rp | wc -l)" -ge "$pool" ]; do wait -n; done
      log="$logs/sanitizer-$tool-$(basename "$exe").log"
      ( begin=$SECONDS
        sanitize_once_more "$tool" "$exe" "$log" && result=PASS || result=FAIL
        echo "$result $((SECONDS - begin))" >"$log.result" ) &
    done
  done
  wait
  summary+=("$(printf '%-44s %-4s %5ss' "compute-sanitizer, $pool runs at a time" '' $((SECONDS - start)))")
  for tool in "${tools[@]}"; do
    bad=$(grep -l FAIL "$logs"/sanitizer-"$tool"-*.result 2>/dev/null | sed 's#.*/sanitizer-[a-z]*-##; s#\.log\.result##' | tr '\n' ' ')
    # The tool's own time: the sum of its runs' (they overlap with each other and other tools').
    seconds=$(cat "$logs"/sanitizer-"$tool"-*.result 2>/dev/null | awk '{s += $2} END {print s + 0}')
    for exe in "${ordered[@]}"; do  # a run that left no result (killed) fails too
      [ -z "$exe" ] || [ -f "$logs/sanitizer-$tool-$(basename "$exe").log.result" ] ||
        bad+="$(basename "$exe") (no result) "
    done
    result=PASS
    if [ -n "$bad" ]; then result=FAIL; failed=1; fi
    reruns=$(cat "$logs/sanitizer-$tool.reruns" 2>/dev/null | tr '\n' ' ')
    left_out=$(cat "$logs/sanitizer-$tool.left-out" 2>/dev/null | tr '\n' ' ')
    summary+=("$(printf '%-44s %-4s %5ss %s' "sanitizer $tool (${#executables[@]} programs, run-seconds)" "$result" "$seconds" "$bad${reruns:+ (rerun after a sanitizer crash: $reruns)}${left_out:+ (not run by this tool: $left_out)}")")
    echo "[$result] sanitizer $tool $bad"
  done
else
  summary+=("$(printf '%-44s %-4s' 'compute-sanitizer not found' FAIL)")
  failed=1
fi

if [ $bench -eq 1 ]; then
  # The benchmark suite (scripts/bench.sh: every *_bench, the compile cost, the report with each
  # goal met or missed) in the same build; its report lands in LOG_DIR/bench/report.md.
  step bench env BUILD_DIR="$build" "$root/scripts/bench.sh" -o "$logs/bench" \
    -r "${BENCH_REPETITIONS:-10}" -f "${BENCH_FILTER:-.}"
  if [ "${COMPILE_COST_HEADERS:-0}" = 1 ]; then
    step compile_cost-headers "$root/benchmarks/compile_cost.sh" --headers
  fi
fi

# One archive of all logs, for callers that can fetch only a few files.
tar -czf "$logs.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")" 2>/dev/null

echo
echo "== curt GPU check: $(head -n 2 "$logs/machine.txt" | tail -n 1)"
printf '%s\n' "${summary[@]}"
if [ $failed -eq 0 ] && [ "${SKIP_SANITIZER:-0}" = 1 ]; then
  echo "== PASSED, without compute-sanitizer (logs: $logs)"
elif [ $failed -eq 0 ] && [ "${SKIP_TESTS:-0}" = 1 ]; then
  echo "== PASSED, compute-sanitizer only (SKIP_TESTS=1; logs: $logs)"
elif [ $failed -eq 0 ]; then echo "== ALL PASSED (logs: $logs)"; else echo "== FAILURES (logs: $logs)"; fi
exit $failed

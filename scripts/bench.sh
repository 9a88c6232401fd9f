#!/usr/bin/env bash
# The benchmark suite in one command, for a machine with a CUDA GPU: builds the benchmarks in
# Release (sm_90 unless CUDA_ARCH says otherwise), runs each *_bench with Google Benchmark's
# repetitions and random interleaving, writes one JSON file per program, measures the compile
# cost, and prints the report (benchmarks/report.py: the paired overhead with each issue's goal,
# GPU times, batched copies, compile cost) last. The report is also written to OUT/report.md.
#
#   scripts/bench.sh [-o OUT] [-r REPETITIONS] [-f FILTER] [--no-compile-cost] [-- BENCH ARGS...]
#
#   -o OUT          where the JSON, logs and report go (default: bench-results)
#   -r N            repetitions of each benchmark (default 5; medians are reported)
#   -f REGEX        Google Benchmark filter, e.g. 'paired/' for the overhead pairs only
#   --no-compile-cost  skip benchmarks/compile_cost.sh (about a minute)
#   after --, arguments for every benchmark program (e.g. --benchmark_min_time=0.2s)
# Environment: BUILD_DIR (default build-bench), CUDA_ARCH (default 90), BENCH_TIMEOUT (seconds
# per program, default 600: a program past it is stopped, named, and its JSON kept as far as it
# got, so that one slow program cannot use up the machine and the others still run).
#
# OUT also gets machine.txt (nvidia-smi's name, driver, memory and clocks, as CSV) and
# command.txt (this command line), so that the run can be kept: in the checkout that keeps it,
# `python3 benchmarks/perf_doc.py --store OUT` copies OUT into docs/results/<date>-<card>/ and
# regenerates docs/performance.md (tables, charts, each goal met, missed or not measured) from
# every stored run; a JSON cut short by the timeout is read up to its last complete benchmark
# and shown as partial.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/common.sh"

# The command line as given, for command.txt (before the loop below consumes it).
invocation=$(printf '%q ' "$0" "$@")
for name in CUDA_ARCH BENCH_TIMEOUT BUILD_DIR; do  # the settings that change what is measured
  if [ -n "${!name:-}" ]; then invocation="$name=$(printf '%q' "${!name}") $invocation"; fi
done
out=bench-results repetitions=5 filter=. compile_cost=1 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=$2; shift 2 ;;
    -r) repetitions=$2; shift 2 ;;
    -f) filter=$2; shift 2 ;;
    --no-compile-cost) compile_cost=0; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" && out=$(cd "$out" && pwd)
build=${BUILD_DIR:-$root/build-bench}
timeout_s=${BENCH_TIMEOUT:-600}

{
  echo "# scripts/bench.sh's command line, $(date -u +%Y-%m-%dT%H:%M:%SZ), in $PWD, commit" \
    "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo '(with local changes)')"
  echo "${invocation% }"
} >"$out/command.txt"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
    >"$out/machine.txt" 2>/dev/null || rm -f "$out/machine.txt"
fi

echo "== building the benchmarks (Release, sm_${CUDA_ARCH:-90}) in $build"
cmake -S "$root" -B "$build" $(curt_generator_args) -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >"$out/configure.log" 2>&1 ||
  { cat "$out/configure.log"; exit 1; }
programs=()
for source in "$root"/benchmarks/*_bench.cu; do programs+=("$(basename "$source" .cu)"); done
cmake --build "$build" -j "$(curt_jobs)" --target "${programs[@]}" >"$out/build.log" 2>&1 ||
  { tail -n 40 "$out/build.log"; exit 1; }

failed=0 timed_out=()
for name in "${programs[@]}"; do
  echo "== $name"
  # The programs print their own summary table; the JSON carries every aggregate. timeout: TERM
  # after BENCH_TIMEOUT seconds, KILL 10 s later; the JSON then stops inside its benchmark list,
  # and report.py and perf_doc.py read the entries written before the stop.
  timeout -k 10 "$timeout_s" "$build/benchmarks/$name" --benchmark_repetitions="$repetitions" \
    --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
    --benchmark_filter="$filter" --benchmark_out="$out/$name.json" \
    --benchmark_out_format=json "${extra[@]}" >"$out/$name.log" 2>&1
  status=$?
  if [ $status -eq 77 ]; then
    echo "no CUDA device: nothing measured"; exit 77
  elif [ $status -eq 124 ] || [ $status -eq 137 ]; then
    echo "$name timed out after ${timeout_s} s (BENCH_TIMEOUT): partial JSON kept in $out/$name.json"
    timed_out+=("$name"); failed=1
  elif [ $status -ne 0 ]; then
    echo "$name failed (exit $status); its log:"; tail -n 20 "$out/$name.log"; failed=1
  fi
done

if [ $compile_cost -eq 1 ]; then
  echo "== compile cost"
  NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}" \
    "$root/benchmarks/compile_cost.sh" >"$out/compile_cost.log" 2>&1 || failed=1
fi

echo
python3 "$root/benchmarks/report.py" --svg "$out/overhead.svg" "$out" | tee "$out/report.md"
echo
[ ${#timed_out[@]} -eq 0 ] || echo "timed out (partial JSON): ${timed_out[*]}"
echo "JSON, logs and report.md in $out (keep it: python3 benchmarks/perf_doc.py --store $out)"
exit $failed

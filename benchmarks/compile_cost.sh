#!/usr/bin/env bash
# What including curt costs at compile time, measured side by side in one run.
#
#   benchmarks/compile_cost.sh [-n N] [--headers]
#
# Default mode: a baseline and a curt translation unit,
#   baseline  <cuda_runtime.h> <system_error> <string> <memory> <mutex>
#   curt      <curt/curt.hpp> (every header that needs nothing beyond the CUDA runtime)
# for g++ (-fsyntax-only, .cpp: one small function each) and for nvcc (-c -arch=sm_90, .cu: the
# same kernel and one launch of it each, <<<>>> and curt::launch), alternating baseline and curt
# (A B A B ...) N times after one untimed warm-up compile of each. Prints a markdown table of
# the medians, the ratio curt / baseline against the goal (1.8x for g++, 1.3x for nvcc: PASS or
# OVER), and the preprocessed line count (g++ -E | wc -l) and header count (g++ -M) of each TU.
#
# --headers: the g++ compile time of each public header include/curt/*.hpp alone (a TU that
#   only includes it), median of N, interleaved header by header, with the baseline TU as the
#   reference: what is heavy.
#
# It is a measurement, not a test: it exits 0 whatever the ratios, and non-zero only when a
# compile fails (or on a usage error). Run nothing else heavy at the same time.
#
# Environment: CXX (default g++), NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc),
# CUDA_HOME (default: the toolkit that NVCC belongs to), COMPILE_COST_RUNS (default N: 7).
set -uo pipefail
export LC_ALL=C  # "." as the decimal point of $EPOCHREALTIME and printf

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=${COMPILE_COST_RUNS:-7}
mode=compare

usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -n|--runs) runs=${2:-}; shift 2 ;;
    -n*) runs=${1#-n}; shift ;;
    --runs=*) runs=${1#--runs=}; shift ;;
    --headers) mode=headers; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compile_cost.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "compile_cost.sh: N must be a positive integer, not '$runs'" >&2
  exit 2
fi

cxx=${CXX:-g++}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ -z "${CUDA_HOME:-}" ]; then
  if [ -x "$nvcc" ] || command -v "$nvcc" >/dev/null 2>&1; then
    CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v "$nvcc")")")")
  else
    CUDA_HOME=/usr/local/cuda
  fi
fi
cxx_flags=(-std=c++17 -I"$root/include" -I"$CUDA_HOME/include" -I"$CUDA_HOME/include/cccl")
nvcc_flags=(-std=c++17 -arch=sm_90 --extended-lambda -I"$root/include")

work=$(mktemp -d "${TMPDIR:-/tmp}/curt-compile-cost.XXXXXX")
trap 'rm -rf "$work"' EXIT

cat >"$work/baseline.cpp" <<'EOF'
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <string>
#include <system_error>

int compile_cost_probe() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}
EOF
cat >"$work/curt.cpp" <<'EOF'
#include <curt/curt.hpp>

int compile_cost_probe() { return curt::device_count(); }
EOF
# The .cu files hold the same kernel and one launch of it each: what every .cu file of a user pays.
cat >"$work/baseline.cu" <<'EOF'
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <string>
#include <system_error>

__global__ void scale(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

cudaError_t run(float* data, int n, cudaStream_t stream) {
  scale<<<(n + 255) / 256, 256, 0, stream>>>(data, 2.0f, n);
  return cudaGetLastError();
}
EOF
cat >"$work/curt.cu" <<'EOF'
#include <curt/curt.hpp>

__global__ void scale(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

void run(float* data, int n, curt::stream_ref stream) {
  curt::launch(stream, curt::launch_config(curt::ceil_div(n, 256), 256), scale, data, 2.0f, n);
}
EOF

# compile COMPILER_KIND SOURCE: one compile to an object file; on failure prints the compiler's
# output and exits 1 (the only non-zero exit of a measurement).
compile() {
  local kind=$1 source=$2 command
  if [ "$kind" = nvcc ]; then
    command=("$nvcc" "${nvcc_flags[@]}" -c "$source" -o "$work/out.o")
  else
    command=("$cxx" "${cxx_flags[@]}" -fsyntax-only "$source")
  fi
  if ! "${command[@]}" >"$work/compiler.log" 2>&1; then
    echo "compile_cost.sh: compile failed: ${command[*]}" >&2
    cat "$work/compiler.log" >&2
    exit 1
  fi
}

# timed KEY COMPILER_KIND SOURCE: compiles once and appends the wall time in seconds to
# $work/KEY.times.
timed() {
  local key=$1 start end
  start=$EPOCHREALTIME
  compile "$2" "$3"
  end=$EPOCHREALTIME
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }' >>"$work/$key.times"
}

median() { sort -g "$work/$1.times" | awk '{ v[NR] = $1 } END {
  if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { sort -g "$work/$1.times" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.3f-%.3f", lo, hi }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }

# Preprocessed lines and headers of a TU as g++ sees it.
pp_lines() { "$cxx" "${cxx_flags[@]}" -E "$1" 2>/dev/null | wc -l; }
header_count() {
  "$cxx" "${cxx_flags[@]}" -M "$1" 2>/dev/null |
    sed 's/\\$//' | tr ' ' '\n' | grep -v -e '^$' -e ':$' -e "^$1\$" | sort -u | wc -l
}
curt_header_count() {
  "$cxx" "${cxx_flags[@]}" -M "$1" 2>/dev/null |
    sed 's/\\$//' | tr ' ' '\n' | grep "^$root/include/" | sort -u | wc -l
}

have_nvcc=1
command -v "$nvcc" >/dev/null 2>&1 || have_nvcc=0

echo "## curt compile cost ($(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $(nproc) cores)"
echo
echo "- g++: $("$cxx" --version | head -n 1) ($cxx)"
if [ $have_nvcc -eq 1 ]; then
  echo "- nvcc: $("$nvcc" --version | grep -i release | sed 's/.*release/release/') ($nvcc)"
else
  echo "- nvcc: not found ($nvcc): its row is left out"
fi
echo "- CUDA headers for g++: $CUDA_HOME/include, $CUDA_HOME/include/cccl"
echo "- median of $runs compiles each, alternating, after one warm-up compile;" \
     "load average before: $(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null)"
echo

if [ "$mode" = compare ]; then
  echo "g++ flags: ${cxx_flags[*]} -fsyntax-only"
  echo "nvcc flags: ${nvcc_flags[*]} -c"
  echo
  kinds=(gxx)
  [ $have_nvcc -eq 1 ] && kinds+=(nvcc)
  for kind in "${kinds[@]}"; do  # warm-up: page cache, compiler binaries
    ext=cpp; [ "$kind" = nvcc ] && ext=cu
    compile "$kind" "$work/baseline.$ext"
    compile "$kind" "$work/curt.$ext"
  done
  for ((i = 0; i < runs; i++)); do
    for kind in "${kinds[@]}"; do
      ext=cpp; [ "$kind" = nvcc ] && ext=cu
      timed "$kind-baseline" "$kind" "$work/baseline.$ext"
      timed "$kind-curt" "$kind" "$work/curt.$ext"
    done
  done

  echo "| compiler | baseline median (s) | curt median (s) | ratio | goal | result |"
  echo "|---|---:|---:|---:|---:|---|"
  for kind in "${kinds[@]}"; do
    name="g++ -fsyntax-only"; goal=1.80
    [ "$kind" = nvcc ] && { name="nvcc -c (a kernel and its launch)"; goal=1.30; }
    base=$(median "$kind-baseline")
    mine=$(median "$kind-curt")
    r=$(ratio "$base" "$mine")
    result=$(awk -v r="$r" -v g="$goal" 'BEGIN { print (r <= g) ? "PASS" : "OVER" }')
    echo "| $name | $base | $mine | ${r}x | ${goal}x | $result |"
  done
  echo
  echo "| TU (as g++ sees it) | preprocessed lines (g++ -E) | headers (g++ -M) | of them curt's |"
  echo "|---|---:|---:|---:|"
  for tu in baseline curt; do
    echo "| $tu | $(pp_lines "$work/$tu.cpp") | $(header_count "$work/$tu.cpp") |" \
         "$(curt_header_count "$work/$tu.cpp") |"
  done
  echo
  echo "Each run, min-max (s):"
  for kind in "${kinds[@]}"; do
    for tu in baseline curt; do
      printf '  %-14s %s  [%s]\n' "$kind $tu" "$(spread "$kind-$tu")" \
        "$(tr '\n' ' ' <"$work/$kind-$tu.times" | sed 's/ $//')"
    done
  done
else
  names=(baseline)
  for header in "$root"/include/curt/*.hpp; do
    name=$(basename "$header" .hpp)
    names+=("$name")
    # memory_resource.hpp requires CCCL's experimental switch, which the user defines.
    [ "$name" = memory_resource ] &&
      printf '#define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE\n' >"$work/h-$name.cpp"
    printf '#include <curt/%s.hpp>\n' "$name" >>"$work/h-$name.cpp"
  done
  cp "$work/baseline.cpp" "$work/h-baseline.cpp"
  echo "g++ flags: ${cxx_flags[*]} -c; each TU includes one header (baseline: the default mode's)"
  echo
  for name in "${names[@]}"; do compile gxx "$work/h-$name.cpp"; done  # warm-up
  for ((i = 0; i < runs; i++)); do
    for name in "${names[@]}"; do timed "h-$name" gxx "$work/h-$name.cpp"; done
  done
  base=$(median h-baseline)
  {
    for name in "${names[@]}"; do
      printf '%s %s\n' "$(median "h-$name")" "$name"
    done
  } | sort -g -r >"$work/header-medians"
  echo "| header | g++ median (s) | vs baseline TU | min-max (s) | preprocessed lines | headers |"
  echo "|---|---:|---:|---:|---:|---:|"
  while read -r t name; do
    label="curt/$name.hpp"
    [ "$name" = baseline ] && label="(baseline TU)"
    echo "| $label | $t | $(ratio "$base" "$t")x | $(spread "h-$name") |" \
         "$(pp_lines "$work/h-$name.cpp") | $(header_count "$work/h-$name.cpp") |"
  done <"$work/header-medians"
fi
exit 0

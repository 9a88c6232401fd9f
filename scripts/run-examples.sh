#!/usr/bin/env bash
# Builds the examples and runs each one. Each checks itself against a CPU reference.
#   scripts/run-examples.sh [build-dir]     (CUDA_ARCH=90 by default)
# With a GPU: each example's output under its name, PASS or FAIL, and a summary line
# ("14 passed, 0 failed"). Without one (exit code 77): each skipped example named once and one
# summary line ("14 examples skipped: no CUDA device"). Exits 1 if any example failed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/common.sh"
build=${1:-$root/build-examples}
cmake -S "$root" -B "$build" $(curt_generator_args) -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
  -DCURT_BUILD_EXAMPLES=ON -DCURT_BUILD_TESTS=OFF -DCURT_BUILD_BENCHMARKS=OFF
cmake --build "$build" -j "$(curt_jobs)"

# The examples are CTest's tests labelled "examples" (example.NAME runs $build/examples/NAME).
mapfile -t names < <(ctest --test-dir "$build" -N -L examples |
                     sed -n 's/^ *Test *#[0-9]*: example\.\(.*\)$/\1/p')
if [ ${#names[@]} -eq 0 ]; then
  echo "no examples found in $build" >&2
  exit 1
fi
passed=0 failed=0 skipped=0
reason=""
for name in "${names[@]}"; do
  set +e
  output=$("$build/examples/$name" 2>&1)
  code=$?
  set -e
  case $code in
    0)
      printf '== %s\n%s\n   PASS\n' "$name" "$output"
      passed=$((passed + 1)) ;;
    77)
      echo "skipped: $name"
      # The examples say why: "NAME: no CUDA device: skipped (REASON)".
      [ -n "$reason" ] ||
        reason=$(printf '%s\n' "$output" | sed -n '/skipped (/{s/.*skipped (\(.*\))$/\1/p;q;}')
      skipped=$((skipped + 1)) ;;
    *)
      printf '== %s\n%s\n   FAIL (exit code %d)\n' "$name" "$output" "$code"
      failed=$((failed + 1)) ;;
  esac
done
if [ $skipped -eq ${#names[@]} ]; then
  [ -z "$reason" ] || echo "CUDA: $reason"
  echo "$skipped examples skipped: no CUDA device"
else
  summary="$passed passed, $failed failed"
  [ $skipped -eq 0 ] || summary="$summary, $skipped skipped (no CUDA device)"
  echo "$summary"
fi
[ $failed -eq 0 ]

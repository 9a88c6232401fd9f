#!/usr/bin/env bash
# Builds the examples and runs each one. Each checks itself against a CPU reference.
#   scripts/run-examples.sh [build-dir]     (CUDA_ARCH=90 by default)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/common.sh"
build=${1:-$root/build-examples}
cmake -S "$root" -B "$build" $(curt_generator_args) -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
  -DCURT_BUILD_TESTS=OFF -DCURT_BUILD_BENCHMARKS=OFF
cmake --build "$build" -j "$(curt_jobs)"
status=0
for example in $(find "$build/examples" -maxdepth 2 -type f -perm -u+x | sort); do
  echo "== $(basename "$example")"
  set +e
  "$example"
  code=$?
  set -e
  case $code in
    0) ;;
    77) echo "   (skipped: this machine has no usable CUDA device)" ;;
    *) echo "   FAILED with exit code $code"; status=1 ;;
  esac
done
exit $status

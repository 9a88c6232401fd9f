#!/usr/bin/env bash
# Builds everything (library checks, tests, examples, benchmarks) and runs all tests.
# Without a GPU, the GPU tests and examples report "Skipped"; everything else must pass.
#   scripts/run-tests.sh [build-dir]        (CUDA_ARCH=90 by default)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/common.sh"
build=${1:-$root/build}
curt_install_packages
cmake -S "$root" -B "$build" $(curt_generator_args) -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}"
cmake --build "$build" -j "$(curt_jobs)"
ctest --test-dir "$build" --output-on-failure -j "$(curt_jobs)"

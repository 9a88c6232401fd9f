#!/usr/bin/env bash
# Builds the API reference (HTML) from the public headers' /// comments with Doxygen:
#   scripts/api-docs.sh [OUT_DIR]        (default build/api-docs; open OUT_DIR/html/index.html)
# Fails, listing them, on any Doxygen warning: an undocumented public type or function, a broken
# reference. curt::detail is not part of the reference.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(mkdir -p "${1:-$root/build/api-docs}" && cd "${1:-$root/build/api-docs}" && pwd)
source "$root/scripts/common.sh"
command -v doxygen >/dev/null || curt_apt_install doxygen
cd "$root"
warnings=$out/warnings.txt
rm -rf "$warnings" "$out/html"  # nothing of an earlier run may pass for this one
status=0
{ cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $out"; echo "WARN_LOGFILE = $warnings"; } |
  doxygen - >"$out/doxygen.log" 2>&1 || status=$?
count=$(sort -u "$warnings" 2>/dev/null | grep -c . || true)
if [ "$status" -ne 0 ] && [ "$count" -eq 0 ]; then
  tail -20 "$out/doxygen.log"
  echo "api-docs: doxygen failed (exit status $status; log: $out/doxygen.log)"
  exit 1
fi
if [ "$count" -ne 0 ] || [ ! -f "$out/html/index.html" ]; then
  sort -u "$warnings" | sed "s|$root/||" | awk 'NR <= 60'
  echo "api-docs: $count Doxygen warnings (log: $out/doxygen.log)"
  exit 1
fi
echo "api-docs: $out/html/index.html, no warnings"

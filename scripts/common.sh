# Shared by curt's scripts: generator choice and installing missing build dependencies.

curt_generator_args() {
  if command -v ninja >/dev/null 2>&1; then echo "-G Ninja"; fi
}

curt_jobs() { nproc 2>/dev/null || echo 2; }

# Build tool arguments that keep going past a failed target, so one run shows every failure.
curt_keep_going_args() {
  if command -v ninja >/dev/null 2>&1; then echo "-- -k 0"; else echo "-- -k"; fi
}

# Installs Debian/Ubuntu packages that are missing (Catch2, Google Benchmark), as root or via sudo.
curt_install_packages() {
  local missing=()
  [ -n "$(find /usr/lib /usr/local/lib /usr/share -name 'Catch2Config.cmake' 2>/dev/null | head -n1)" ] ||
    missing+=(catch2)
  [ -n "$(find /usr/lib /usr/local/lib -name 'benchmarkConfig.cmake' 2>/dev/null | head -n1)" ] ||
    missing+=(libbenchmark-dev)
  curt_apt_install "${missing[@]}"
}

# apt-get install PACKAGES... (none: nothing to do), as root or via sudo.
curt_apt_install() {
  [ $# -eq 0 ] && return 0
  echo "installing missing packages: $*"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: please install $* (Catch2 v2.13+ or v3, Google Benchmark, Doxygen)" >&2
    return 1
  fi
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

# vcpkg overlay port of curt, built from the checkout it sits in (ports/curt/../..): no download.
#   vcpkg install curt --overlay-ports=<curt checkout>/ports
# or, in manifest mode, "curt" in the project's vcpkg.json dependencies and
# VCPKG_OVERLAY_PORTS=<curt checkout>/ports. Header-only; the CUDA toolkit (nvcc, the CUDA
# runtime and CCCL) must be installed on the machine: find_package(curt) finds it with
# find_package(CUDAToolkit). tests/packaging/vcpkg_port.cmake runs this file with stand-ins for
# the vcpkg functions it calls (CTest: packaging.vcpkg_port).
set(VCPKG_BUILD_TYPE release)  # header-only: one configuration
get_filename_component(SOURCE_PATH "${CURRENT_PORT_DIR}/../.." ABSOLUTE)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    -DCURT_BUILD_TESTS=OFF
    -DCURT_BUILD_EXAMPLES=OFF
    -DCURT_BUILD_BENCHMARKS=OFF
    -DCURT_INSTALL_CMAKEDIR=share/curt
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(PACKAGE_NAME curt CONFIG_PATH share/curt)
# Header-only: no lib/ (and no debug/ tree).
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/lib" "${CURRENT_PACKAGES_DIR}/debug")

file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")

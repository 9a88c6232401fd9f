# cmake -DPORT_DIR=<ports/curt> -DPACKAGES_DIR=<dir> -DBUILDTREES_DIR=<dir> -DGENERATOR=<gen>
#       -DVERSION=<curt's project version> [-DARGS=<more configure args>] -P vcpkg_port.cmake
# Runs ports/curt/portfile.cmake as vcpkg would, with no vcpkg: each vcpkg function the port calls
# has a stand-in here that runs the CMake commands vcpkg runs (configure with the port's options
# and an install prefix of the packages directory, build the install target, check the CMake
# package is in share/curt, install the copyright). A vcpkg function the port
# calls and this file lacks is an error (unknown command). Then it checks vcpkg.json (name,
# version = curt's) and the installed tree: headers, share/curt/curtConfig.cmake, usage,
# copyright, no lib/. packaging.vcpkg_first_program then builds the README's first program
# with find_package(curt) against PACKAGES_DIR, as a vcpkg user would.
cmake_minimum_required(VERSION 3.25)

set(PORT curt)
set(TARGET_TRIPLET x64-linux)
set(CURRENT_PORT_DIR ${PORT_DIR})
set(CURRENT_PACKAGES_DIR ${PACKAGES_DIR})
set(CURRENT_BUILDTREES_DIR ${BUILDTREES_DIR})
file(REMOVE_RECURSE ${CURRENT_PACKAGES_DIR} ${CURRENT_BUILDTREES_DIR})

function(vcpkg_cmake_configure)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "SOURCE_PATH" "OPTIONS;OPTIONS_RELEASE")
  # What vcpkg_cmake_configure passes that matters to curt: a Release build, the packages
  # directory as install prefix, lib as CMAKE_INSTALL_LIBDIR, no package registry.
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${arg_SOURCE_PATH}
                          -B ${CURRENT_BUILDTREES_DIR}/${TARGET_TRIPLET}-rel -G ${GENERATOR}
                          -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=${CURRENT_PACKAGES_DIR}
                          -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_EXPORT_NO_PACKAGE_REGISTRY=ON
                          -DFETCHCONTENT_FULLY_DISCONNECTED=ON ${arg_OPTIONS}
                          ${arg_OPTIONS_RELEASE} ${ARGS}
                  RESULT_VARIABLE result)
  if(result)
    message(FATAL_ERROR "vcpkg_cmake_configure: configuring ${arg_SOURCE_PATH} failed")
  endif()
endfunction()

function(vcpkg_cmake_install)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${CURRENT_BUILDTREES_DIR}/${TARGET_TRIPLET}-rel
                          --target install
                  RESULT_VARIABLE result)
  if(result)
    message(FATAL_ERROR "vcpkg_cmake_install: the install target failed")
  endif()
endfunction()

# vcpkg's moves a package from CONFIG_PATH to share/<name> and rewrites the relative paths in it;
# the port installs it in share/curt already (CURT_INSTALL_CMAKEDIR), where there is nothing to
# move or rewrite. This stand-in checks that and fails for any other CONFIG_PATH.
function(vcpkg_cmake_config_fixup)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "PACKAGE_NAME;CONFIG_PATH" "")
  if(NOT arg_CONFIG_PATH STREQUAL "share/${arg_PACKAGE_NAME}")
    message(FATAL_ERROR "vcpkg_cmake_config_fixup stand-in: CONFIG_PATH must be share/<name>")
  endif()
  if(NOT EXISTS ${CURRENT_PACKAGES_DIR}/${arg_CONFIG_PATH}/${arg_PACKAGE_NAME}Config.cmake)
    message(FATAL_ERROR "vcpkg_cmake_config_fixup: no ${arg_PACKAGE_NAME}Config.cmake in "
                        "${CURRENT_PACKAGES_DIR}/${arg_CONFIG_PATH}")
  endif()
endfunction()

function(vcpkg_install_copyright)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "FILE_LIST")
  file(READ ${arg_FILE_LIST} text)
  file(WRITE ${CURRENT_PACKAGES_DIR}/share/${PORT}/copyright "${text}")
endfunction()

file(READ ${PORT_DIR}/vcpkg.json manifest)
string(JSON name GET "${manifest}" name)
string(JSON version GET "${manifest}" version)
if(NOT name STREQUAL "curt" OR NOT version STREQUAL VERSION)
  message(FATAL_ERROR "vcpkg.json: name '${name}', version '${version}'; curt is ${VERSION}")
endif()

include(${PORT_DIR}/portfile.cmake)

foreach(path include/curt/curt.hpp share/curt/curtConfig.cmake share/curt/curtConfigVersion.cmake
             share/curt/curtTargets.cmake share/curt/usage share/curt/copyright)
  if(NOT EXISTS ${CURRENT_PACKAGES_DIR}/${path})
    message(FATAL_ERROR "the port installed no ${path}")
  endif()
endforeach()
if(EXISTS ${CURRENT_PACKAGES_DIR}/lib OR EXISTS ${CURRENT_PACKAGES_DIR}/debug)
  message(FATAL_ERROR "the port left lib/ or debug/ in ${CURRENT_PACKAGES_DIR}")
endif()
message("PASS: the port installed curt ${version} into ${CURRENT_PACKAGES_DIR}")

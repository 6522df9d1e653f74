# Apache Arrow and Parquet (C++) for the Parquet text reader, from the pinned pyarrow wheel that
# tools/setup_arrow.sh unpacks (`make configure` runs it and passes TENAX_ARROW_PREFIX). The
# wheel has no CMake package, so the two libraries become imported targets here:
#   TenaxArrow::arrow    <prefix>/lib/libarrow.so.<so version>
#   TenaxArrow::parquet  <prefix>/lib/libparquet.so.<so version>, needs TenaxArrow::arrow
# Their headers come in as SYSTEM, as an imported target's do (warnings-as-errors stays on for
# Tenax's own code; Arrow's headers are not -Wall -Wextra clean under GCC 12). Only the
# SDK's Parquet reader and the tests that write Parquet include them; no public header does.
#
# Programs find the libraries at run time through their RPATH: the prefix in the build tree,
# $ORIGIN/../lib beside an installed Tenax (the libraries are installed with it).
if(DEFINED ENV{TENAX_ASSETS})
  set(tenax_arrow_default "$ENV{TENAX_ASSETS}/arrow")
else()
  set(tenax_arrow_default "${PROJECT_SOURCE_DIR}/.assets/arrow")
endif()
set(TENAX_ARROW_PREFIX "${tenax_arrow_default}" CACHE PATH
    "tools/setup_arrow.sh's prefix (holds include/arrow, include/parquet and lib/lib{arrow,parquet}.so.*)")

set(tenax_arrow_config "${TENAX_ARROW_PREFIX}/include/arrow/util/config.h")
if(NOT EXISTS "${tenax_arrow_config}")
  message(FATAL_ERROR "Tenax needs Apache Arrow's C++ libraries (the Parquet text reader) at "
                      "TENAX_ARROW_PREFIX='${TENAX_ARROW_PREFIX}', which has no include/arrow: run "
                      "`bash tools/setup_arrow.sh` (`make configure` does) and pass the prefix it prints "
                      "as -DTENAX_ARROW_PREFIX=<prefix>")
endif()
file(STRINGS "${tenax_arrow_config}" tenax_arrow_so_version REGEX "^#define ARROW_SO_VERSION ")
file(STRINGS "${tenax_arrow_config}" TENAX_ARROW_VERSION REGEX "^#define ARROW_VERSION_STRING ")
string(REGEX REPLACE ".*\"(.*)\".*" "\\1" tenax_arrow_so_version "${tenax_arrow_so_version}")
string(REGEX REPLACE ".*\"(.*)\".*" "\\1" TENAX_ARROW_VERSION "${TENAX_ARROW_VERSION}")

foreach(lib IN ITEMS arrow parquet)
  set(file "${TENAX_ARROW_PREFIX}/lib/lib${lib}.so.${tenax_arrow_so_version}")
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "${file} is missing (Arrow ${TENAX_ARROW_VERSION}'s headers are there): run "
                        "`bash tools/setup_arrow.sh` again")
  endif()
  add_library(TenaxArrow::${lib} SHARED IMPORTED)
  set_target_properties(TenaxArrow::${lib} PROPERTIES
    IMPORTED_LOCATION "${file}"
    IMPORTED_SONAME "lib${lib}.so.${tenax_arrow_so_version}"
    INTERFACE_INCLUDE_DIRECTORIES "${TENAX_ARROW_PREFIX}/include")
  list(APPEND TENAX_ARROW_LIBRARIES "${file}")
endforeach()
set_target_properties(TenaxArrow::parquet PROPERTIES INTERFACE_LINK_LIBRARIES TenaxArrow::arrow)

# The wheel's libparquet carries a static OpenSSL libcrypto (for Parquet's modular encryption,
# which Tenax does not use) and exports all of it, ~7,000 symbols under libcrypto's own version
# tag OPENSSL_3.0.0. Ahead of Debian's libcrypto.so.3 in a program's load order (which libtorch
# and HDF5 bring in through libssl and libcurl), it captured that library's calls to itself:
# LD_DEBUG=bindings showed libcrypto.so.3 bound to libparquet for thousands of its symbols, two
# OpenSSL builds sharing one state the first time anything in the process used TLS. So every
# program that links libparquet names the system's libcrypto first (link options come before
# the libraries on the command line; --no-as-needed keeps it), and Debian's copy serves every
# caller; libparquet's own OpenSSL is only reached through Parquet encryption.
find_library(TENAX_SYSTEM_LIBCRYPTO NAMES libcrypto.so.3 crypto)
if(TENAX_SYSTEM_LIBCRYPTO)
  set_target_properties(TenaxArrow::parquet PROPERTIES INTERFACE_LINK_OPTIONS
    "LINKER:--push-state,--no-as-needed,${TENAX_SYSTEM_LIBCRYPTO},--pop-state")
endif()
message(STATUS "Tenax: Arrow/Parquet ${TENAX_ARROW_VERSION} from ${TENAX_ARROW_PREFIX}")

# Installed beside Tenax's own libraries, where the installed programs' and libtenax's RPATH
# ($ORIGIN/../lib) finds them; TenaxConfig.cmake declares the same two targets over them.
install(FILES ${TENAX_ARROW_LIBRARIES} DESTINATION ${CMAKE_INSTALL_LIBDIR})
list(APPEND CMAKE_INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
set(TENAX_ARROW_SO_VERSION "${tenax_arrow_so_version}")

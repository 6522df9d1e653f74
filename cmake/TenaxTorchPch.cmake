# One precompiled <torch/torch.h> shared by every Tenax target that compiles against libtorch.
#
# Parsing <torch/torch.h> costs about 20 s of CPU in every translation unit that includes it
# (330,000 preprocessed lines), half or more of such a unit's compile; there are about a hundred
# of them. The header is compiled once, into tenax_torch_pch, and every other target reuses it
# (tenax_torch_pch(<target>...)). docs/development.md has the measurement.
#
# GCC accepts a precompiled header only when it was made with the same code-model options: a PCH
# made with -fPIC is refused for a -fPIE executable (and the header is silently parsed again), so
# the executables that reuse it are compiled with -fPIC too (the last of -fPIE/-fPIC wins; PIC
# objects link into a PIE executable). Clang is stricter (a mismatch is an error), and the fuzz
# build instruments every object, so the PCH is GCC's only; TENAX_PCH=OFF turns it off.
include_guard(GLOBAL)

set(tenax_pch_default OFF)
# The CUDA flavour keeps its own per-target headers (sdk/CMakeLists.txt, tests/gpu) until the
# shared one has been built there: no session with its toolkit and wheel has built it yet.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT TENAX_BUILD_FUZZERS AND NOT TENAX_CUDA)
  set(tenax_pch_default ON)
endif()
option(TENAX_PCH "Precompile <torch/torch.h> once for every target that uses libtorch" ${tenax_pch_default})

if(TENAX_PCH)
  add_library(tenax_torch_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/torch_pch_host.cpp)
  target_link_libraries(tenax_torch_pch PRIVATE ${TORCH_LIBRARIES})
  target_precompile_headers(tenax_torch_pch PRIVATE <torch/torch.h>)
  set_target_properties(tenax_torch_pch PROPERTIES POSITION_INDEPENDENT_CODE ON)
endif()

# The folders a project include ("x.h" or <tenax/...>) is looked for in, besides the includer's.
file(GLOB tenax_header_roots LIST_DIRECTORIES true
     ${PROJECT_SOURCE_DIR}/*/include ${PROJECT_SOURCE_DIR}/*/src)
list(APPEND tenax_header_roots ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/examples)
set_property(GLOBAL PROPERTY tenax_header_roots "${tenax_header_roots}")

# tenax_reaches_torch(<file> <out>): TRUE when <file> includes a libtorch header (torch/, ATen/,
# c10/), directly or through the project's own headers; memoized per file for the configure run.
function(tenax_reaches_torch file out)
  get_property(known GLOBAL PROPERTY "tenax_torch:${file}" SET)
  if(known)
    get_property(value GLOBAL PROPERTY "tenax_torch:${file}")
    set(${out} ${value} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY "tenax_torch:${file}" FALSE)  # an include cycle ends here
  get_property(roots GLOBAL PROPERTY tenax_header_roots)
  get_filename_component(dir "${file}" DIRECTORY)
  file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  set(result FALSE)
  foreach(line IN LISTS includes)
    if(line MATCHES "[<\"](torch|ATen|c10)/")
      set(result TRUE)
      break()
    endif()
    if(NOT line MATCHES "[<\"]([^>\"]+)[>\"]")
      continue()
    endif()
    set(name "${CMAKE_MATCH_1}")
    foreach(root IN ITEMS "${dir}" ${roots})
      if(EXISTS "${root}/${name}" AND NOT IS_DIRECTORY "${root}/${name}")
        get_filename_component(header "${root}/${name}" REALPATH)
        tenax_reaches_torch("${header}" nested)
        if(nested)
          set(result TRUE)
        endif()
        break()
      endif()
    endforeach()
    if(result)
      break()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "tenax_torch:${file}" ${result})
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# tenax_torch_pch(<target>...): compile the targets' C++ units that include libtorch with the
# shared precompiled header. A unit that does not include it is left alone: the PCH would cost
# it more than it saves (loading 700 MB of compiler state: lr_schedule.cpp 0.6 -> 4.9 s of CPU,
# commit_protocol.cpp 9.4 -> 20 s), while a libtorch unit halves (state_capture.cpp 21.7 -> 9.9 s).
function(tenax_torch_pch)
  if(NOT TENAX_PCH)
    return()
  endif()
  foreach(target IN LISTS ARGN)
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    set(torch_units 0)
    set(other_units "")
    foreach(source IN LISTS sources)
      if(source MATCHES "\\$<" OR NOT source MATCHES "\\.(cpp|cc|cxx)$")
        continue()
      endif()
      get_filename_component(path "${source}" REALPATH BASE_DIR "${source_dir}")
      tenax_reaches_torch("${path}" uses_torch)
      if(uses_torch)
        math(EXPR torch_units "${torch_units} + 1")
      else()
        list(APPEND other_units "${source}")
      endif()
    endforeach()
    if(torch_units EQUAL 0)
      continue()
    endif()
    target_precompile_headers(${target} REUSE_FROM tenax_torch_pch)
    if(other_units)
      set_source_files_properties(${other_units} TARGET_DIRECTORY ${target}
                                  PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "EXECUTABLE")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fPIC>)
    endif()
  endforeach()
endfunction()

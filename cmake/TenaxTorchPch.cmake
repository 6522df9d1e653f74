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
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT TENAX_BUILD_FUZZERS)
  set(tenax_pch_default ON)
endif()
option(TENAX_PCH "Precompile <torch/torch.h> once for every target that uses libtorch" ${tenax_pch_default})

if(TENAX_PCH)
  add_library(tenax_torch_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/torch_pch_host.cpp)
  target_link_libraries(tenax_torch_pch PRIVATE ${TORCH_LIBRARIES})
  target_precompile_headers(tenax_torch_pch PRIVATE <torch/torch.h>)
  set_target_properties(tenax_torch_pch PROPERTIES POSITION_INDEPENDENT_CODE ON)
endif()

# tenax_torch_pch(<target>...): compile the targets' C++ with the shared precompiled header.
function(tenax_torch_pch)
  if(NOT TENAX_PCH)
    return()
  endif()
  foreach(target IN LISTS ARGN)
    target_precompile_headers(${target} REUSE_FROM tenax_torch_pch)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "EXECUTABLE")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fPIC>)
    endif()
  endforeach()
endfunction()

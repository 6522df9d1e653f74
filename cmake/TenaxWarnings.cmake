# Warnings are errors for Tenax's own targets only; third-party headers come in as SYSTEM.
function(tenax_strict target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
endfunction()

# Declares a Tenax library for one architecture folder: tenax_<name>, alias tenax::<name>,
# public headers under include/, installed and exported.
function(tenax_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(tenax_${name} ${ARG_SOURCES})
  add_library(tenax::${name} ALIAS tenax_${name})
  set_target_properties(tenax_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME tenax_${name})
  target_include_directories(tenax_${name}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(tenax_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  tenax_strict(tenax_${name})
  install(TARGETS tenax_${name} EXPORT TenaxTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()

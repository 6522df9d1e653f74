# cmake -P script, two modes:
#   -DMODE=install  -DTENAX_BUILD_DIR=... -DPREFIX=... [-DWITH_FORTRAN=ON]
#       installs Tenax into PREFIX (removed first) and checks the files consumers need;
#   -DMODE=consumer -DPREFIX=... -DCONSUMER_SOURCE=... -DWORK_DIR=... -DEXPECT=<text>
#       configures, builds and runs one consumer project against PREFIX with find_package(Tenax);
#       the program gets a scratch directory as its argument and must print EXPECT.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  run_step("install" ${CMAKE_COMMAND} --install ${TENAX_BUILD_DIR} --prefix ${PREFIX})
  set(expected lib/cmake/Tenax/TenaxConfig.cmake lib/cmake/Tenax/TenaxTargets.cmake include/tenax/sdk/trainer.h
      include/tenax/sdk.h include/tenax/tenax.h
      bin/tenax lib/cmake/Tenax/TenaxCTargets.cmake include/tenax.h lib/libtenax.so)
  if(WITH_FORTRAN)
    list(APPEND expected lib/cmake/Tenax/TenaxFortranTargets.cmake include/tenax/fortran/tenax.mod
         lib/libtenax_fortran.a)
  endif()
  foreach(f IN LISTS expected)
    if(NOT EXISTS ${PREFIX}/${f})
      message(FATAL_ERROR "install did not produce ${f}")
    endif()
  endforeach()
  # Internals stay in sdk/src: installed, they would be API that nobody promised to keep.
  foreach(f IN ITEMS tenax/sdk/tensorboard/crc32c.h tenax/sdk/tensorboard/event_proto.h
                     tenax/sdk/tensorboard/tfrecord.h tenax/sdk/tensor_conversion.h tenax/sdk/argument_changes.h)
    if(EXISTS ${PREFIX}/include/${f})
      message(FATAL_ERROR "install put the SDK's private header ${f} into ${PREFIX}/include")
    endif()
  endforeach()
elseif(MODE STREQUAL "consumer")
  file(REMOVE_RECURSE ${WORK_DIR})
  run_step("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK_DIR}/build -G Ninja
           -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release
           "-DCMAKE_CXX_FLAGS=${CONSUMER_CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_LINKER_FLAGS}")
  run_step("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  run_step("run consumer" ${WORK_DIR}/build/consumer ${WORK_DIR}/run)
  if(NOT last_output MATCHES "${EXPECT}")
    message(FATAL_ERROR "the consumer printed '${last_output}', not '${EXPECT}'")
  endif()
else()
  message(FATAL_ERROR "install_check.cmake: MODE must be install or consumer, not '${MODE}'")
endif()

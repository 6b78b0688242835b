# cmake -P script: install, build a consumer two ways, run it.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
# A sanitized libdtensor needs the sanitizer runtime first: build the consumer the same way.
set(cflags "")
if(SANITIZE)
  set(cflags "-fsanitize=address,undefined")
endif()
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# 1. CMake package
run(${CMAKE_COMMAND} -S ${SRC_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
    "-DCMAKE_C_FLAGS=${cflags}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${prefix}/lib ${WORK_DIR}/build/consumer)

# 2. pkg-config
find_program(PKG_CONFIG pkg-config REQUIRED)
execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${prefix}/lib/pkgconfig
  ${PKG_CONFIG} --cflags --libs dtensor OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config dtensor failed")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
separate_arguments(cflags_list UNIX_COMMAND "${cflags}")
run(cc ${cflags_list} ${SRC_DIR}/consumer.c ${flags} -o ${WORK_DIR}/consumer_pc)
run(${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${prefix}/lib ${WORK_DIR}/consumer_pc)

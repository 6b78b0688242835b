# cmake -P script: install this build into a temporary prefix, then build and
# run what a user builds against it, every way README.md ("Using it from your
# build") describes:
#   1. CMake, find_package(dtensor): tests/install/consumer, which builds
#      consumer.c and examples/custom_module (its own CMakeLists.txt, added as
#      a subdirectory) with dtensor::dtensor, and both examples' sources with
#      dtensor::dtensor_static; and examples/mlp_short configured on its own,
#      as a user who copies the folder does;
#   2. pkg-config: `--cflags --libs` with an rpath (shared), and `--static
#      --libs` with libdtensor.a named in place of -ldtensor.
# Each program runs once as one process with no LD_LIBRARY_PATH (rpaths must
# do) and DT_DEVICE=cpu; a static one must not need libdtensor.so at all.
#   3. README.md's example (its first ```c block), as a reader copies it, with
#      pkg-config.
# Inputs: BUILD_DIR SRC_DIR (consumer) EXAMPLES_DIR WORK_DIR LIBDIR SANITIZE README.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
# A sanitized libdtensor needs the sanitizer runtime first: build the consumers the same way.
set(cflags "")
if(SANITIZE)
  set(cflags "-fsanitize=address,undefined")
endif()
separate_arguments(cflags_list UNIX_COMMAND "${cflags}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
# Run @p exe (one process, on the CPU); @p want must appear in its output.
function(run_program exe want)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH DT_DEVICE=cpu ${exe}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${want}")
    message(FATAL_ERROR "${exe} failed (${rc}) or printed no '${want}':\n${out}\n${err}")
  endif()
  message(STATUS "ran ${exe}: ok")
endfunction()
find_program(READELF readelf)
function(expect_static exe)
  if(READELF)
    execute_process(COMMAND ${READELF} -d ${exe} OUTPUT_VARIABLE dyn)
    if(dyn MATCHES "libdtensor")
      message(FATAL_ERROR "${exe} was meant to link libdtensor.a but needs:\n${dyn}")
    endif()
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
set(mlp_want "step 7  loss [0-9.]+")
set(custom_want "step 11  loss [0-9.]+")

# 1. CMake package
run(${CMAKE_COMMAND} -S ${SRC_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
    -DEXAMPLES_DIR=${EXAMPLES_DIR} "-DCMAKE_C_FLAGS=${cflags}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_program(${WORK_DIR}/build/consumer "consumer: dtensor [0-9]+ ok")
if(EXAMPLES_DIR) # empty when the build has no examples (DT_BUILD_EXAMPLES=OFF)
  run_program(${WORK_DIR}/build/custom_module/custom_module "${custom_want}")
  foreach(ex mlp_short custom_module)
    expect_static(${WORK_DIR}/build/${ex}_static)
  endforeach()
  run_program(${WORK_DIR}/build/mlp_short_static "${mlp_want}")
  run_program(${WORK_DIR}/build/custom_module_static "${custom_want}")
  run(${CMAKE_COMMAND} -S ${EXAMPLES_DIR}/mlp_short -B ${WORK_DIR}/mlp_short
      -DCMAKE_PREFIX_PATH=${prefix} "-DCMAKE_C_FLAGS=${cflags}")
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/mlp_short)
  run_program(${WORK_DIR}/mlp_short/mlp_short "${mlp_want}")
endif()

# 2. pkg-config
find_program(PKG_CONFIG pkg-config REQUIRED)
function(pc_flags out)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${prefix}/${LIBDIR}/pkgconfig
    ${PKG_CONFIG} ${ARGN} dtensor OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config ${ARGN} dtensor failed")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  set(${out} ${flags} PARENT_SCOPE)
endfunction()
pc_flags(shared --cflags --libs)
pc_flags(static --cflags --static --libs)
# the linker prefers libdtensor.so when both are installed: name the archive
list(TRANSFORM static REPLACE "^-ldtensor$" "-l:libdtensor.a")
set(rpath -Wl,-rpath,${prefix}/${LIBDIR})
run(cc ${cflags_list} ${SRC_DIR}/consumer.c ${shared} ${rpath} -o ${WORK_DIR}/consumer_pc)
run_program(${WORK_DIR}/consumer_pc "consumer: dtensor [0-9]+ ok")
if(EXAMPLES_DIR)
  run(cc ${cflags_list} ${EXAMPLES_DIR}/mlp_short/mlp_short.c ${shared} ${rpath}
      -o ${WORK_DIR}/mlp_short_pc)
  run_program(${WORK_DIR}/mlp_short_pc "${mlp_want}")
  run(cc ${cflags_list} ${EXAMPLES_DIR}/mlp_short/mlp_short.c ${static}
      -o ${WORK_DIR}/mlp_short_pc_static)
  expect_static(${WORK_DIR}/mlp_short_pc_static)
  run_program(${WORK_DIR}/mlp_short_pc_static "${mlp_want}")
else()
  run(cc ${cflags_list} ${SRC_DIR}/consumer.c ${static} -o ${WORK_DIR}/consumer_pc_static)
  expect_static(${WORK_DIR}/consumer_pc_static)
  run_program(${WORK_DIR}/consumer_pc_static "consumer: dtensor [0-9]+ ok")
endif()

# 3. README.md's example, compiled as printed
file(READ ${README} readme)
string(FIND "${readme}" "```c\n" start)
if(start LESS 0)
  message(FATAL_ERROR "${README} has no ```c block")
endif()
math(EXPR start "${start} + 5")
string(SUBSTRING "${readme}" ${start} -1 readme)
string(FIND "${readme}" "```" end)
string(SUBSTRING "${readme}" 0 ${end} readme)
file(WRITE ${WORK_DIR}/readme_example.c "${readme}")
run(cc ${cflags_list} -Wall -Wextra -Werror ${WORK_DIR}/readme_example.c ${shared} ${rpath}
    -o ${WORK_DIR}/readme_example)
run_program(${WORK_DIR}/readme_example "rank 0 of 1: ok")

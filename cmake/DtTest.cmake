# dt_add_test(NAME n SOURCES a.c ... [RANKS 1 2 3 4] [DEVICES cpu sim cuda] [TIMEOUT s]
#             [ARGS ...] [LABELS ...] [ENV VAR=value ...] [SUFFIX s] [SKIP_RETURN_CODE c])
#
# Builds one cmocka test executable. Without RANKS it runs as one process.
# With RANKS, one ctest entry per count runs it through dtrun as real processes:
# `dtrun -n N exe ARGS` (entry name n_npN). Rank counts above the core count are
# intended: the suite must pass oversubscribed. ENV adds environment variables;
# SUFFIX names a second set of entries of an already built test (n_SUFFIX_npN),
# e.g. the same test with a transport turned off.
#
# Every entry pins its device through DT_DEVICE, so the CPU suite runs the same
# on a machine with GPUs (DT_DEVICE=auto would pick CUDA there): DT_DEVICE=cpu,
# unless ENV sets DT_DEVICE itself. DEVICES runs the test once per device
# (cpu, sim, cuda), each set of entries with DT_DEVICE=<device>: cpu keeps the
# plain names (n, n_npN); the others are named n_<device>, n_<device>_npN and
# labelled <device> (`ctest -L sim`). cuda entries exist only in CUDA builds.
#
# SKIP_RETURN_CODE c: an entry whose program exits with c (by convention 77,
# e.g. no GPU) is reported as skipped, not passed. dtrun exits with the status
# of the first rank that exits non-zero, so every rank must make the same call.
#
# Tests added with a plain add_test set DT_DEVICE=cpu in their ENVIRONMENT
# themselves. To check a program's output, run it through ${DT_EXPECT_RUN}
# (tests/expect_run.sh: the exit status and the text) rather than
# PASS_REGULAR_EXPRESSION (ignores the status) or WILL_FAIL (any failure passes).
find_path(CMOCKA_INCLUDE_DIR cmocka.h REQUIRED)
find_library(CMOCKA_LIBRARY cmocka REQUIRED)

set(DT_TEST_DEVICES cpu sim cuda)
set(DT_EXPECT_RUN sh ${PROJECT_SOURCE_DIR}/tests/expect_run.sh)

function(dt_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;SUFFIX;SKIP_RETURN_CODE"
    "SOURCES;RANKS;ARGS;LABELS;ENV;DEVICES" ${ARGN})
  if(T_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dt_add_test(${T_NAME}): unknown arguments ${T_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set(entry ${T_NAME})
  if(T_SUFFIX)
    set(entry ${T_NAME}_${T_SUFFIX})
  else()
    add_executable(${T_NAME} ${T_SOURCES})
    target_link_libraries(${T_NAME} PRIVATE dtensor_internal ${CMOCKA_LIBRARY})
    target_include_directories(${T_NAME} PRIVATE ${CMOCKA_INCLUDE_DIR} ${PROJECT_SOURCE_DIR}/tests)
  endif()
  set(env "CMOCKA_MESSAGE_OUTPUT=stdout" ${T_ENV})

  # One set of entries per device; "own" runs with the DT_DEVICE the caller put in ENV.
  set(own_device ${T_ENV})
  list(FILTER own_device INCLUDE REGEX "^DT_DEVICE=")
  if(T_DEVICES AND own_device)
    message(FATAL_ERROR "dt_add_test(${T_NAME}): DEVICES and ENV ${own_device} both pick the device")
  elseif(own_device)
    set(devices own)
  elseif(T_DEVICES)
    set(devices ${T_DEVICES})
    list(REMOVE_DUPLICATES devices)
    foreach(dev IN LISTS devices)
      if(NOT dev IN_LIST DT_TEST_DEVICES)
        message(FATAL_ERROR "dt_add_test(${T_NAME}): device '${dev}' is not one of ${DT_TEST_DEVICES}")
      endif()
    endforeach()
  else()
    set(devices cpu)
  endif()

  set(skip "")
  if(NOT "${T_SKIP_RETURN_CODE}" STREQUAL "")
    set(skip SKIP_RETURN_CODE ${T_SKIP_RETURN_CODE})
  endif()

  foreach(dev IN LISTS devices)
    if(dev STREQUAL "cuda" AND NOT DT_HAVE_CUDA)
      continue() # not built into the library: dt_init would refuse it
    endif()
    set(dev_entry ${entry})
    set(dev_env ${env})
    set(dev_labels ${T_LABELS})
    if(NOT dev STREQUAL "own")
      list(APPEND dev_env DT_DEVICE=${dev})
    endif()
    if(NOT dev STREQUAL "own" AND NOT dev STREQUAL "cpu")
      set(dev_entry ${entry}_${dev})
      list(APPEND dev_labels ${dev})
    endif()
    if(NOT T_RANKS)
      add_test(NAME ${dev_entry} COMMAND ${T_NAME} ${T_ARGS})
      set_tests_properties(${dev_entry} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${dev_labels}"
        ENVIRONMENT "${dev_env}" ${skip})
    else()
      set(rank_labels multirank ${dev_labels})
      foreach(n IN LISTS T_RANKS)
        add_test(NAME ${dev_entry}_np${n}
          COMMAND $<TARGET_FILE:dtrun> -n ${n} --tag-output $<TARGET_FILE:${T_NAME}> ${T_ARGS})
        set_tests_properties(${dev_entry}_np${n} PROPERTIES TIMEOUT ${T_TIMEOUT}
          LABELS "${rank_labels}" PROCESSORS 2
          ENVIRONMENT "${dev_env}" ${skip})
      endforeach()
    endif()
  endforeach()
endfunction()

# dt_add_test(NAME n SOURCES a.c ... [RANKS 1 2 3 4] [TIMEOUT s] [ARGS ...] [LABELS ...]
#             [ENV VAR=value ...] [SUFFIX s])
#
# Builds one cmocka test executable. Without RANKS it runs as one process.
# With RANKS, one ctest entry per count runs it through dtrun as real processes:
# `dtrun -n N exe ARGS` (entry name n_npN). Rank counts above the core count are
# intended: the suite must pass oversubscribed. ENV adds environment variables;
# SUFFIX names a second set of entries of an already built test (n_SUFFIX_npN),
# e.g. the same test with a transport turned off.
find_path(CMOCKA_INCLUDE_DIR cmocka.h REQUIRED)
find_library(CMOCKA_LIBRARY cmocka REQUIRED)

function(dt_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;SUFFIX" "SOURCES;RANKS;ARGS;LABELS;ENV" ${ARGN})
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
  if(NOT T_RANKS)
    add_test(NAME ${entry} COMMAND ${T_NAME} ${T_ARGS})
    set_tests_properties(${entry} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
      ENVIRONMENT "${env}")
  else()
    foreach(n IN LISTS T_RANKS)
      add_test(NAME ${entry}_np${n}
        COMMAND $<TARGET_FILE:dtrun> -n ${n} --tag-output $<TARGET_FILE:${T_NAME}> ${T_ARGS})
      set_tests_properties(${entry}_np${n} PROPERTIES TIMEOUT ${T_TIMEOUT}
        LABELS "multirank;${T_LABELS}" PROCESSORS 2
        ENVIRONMENT "${env}")
    endforeach()
  endif()
endfunction()

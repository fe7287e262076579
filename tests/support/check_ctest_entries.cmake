# Fails unless CTest runs every test case of EXECUTABLE exactly once: one CTest entry per test case Catch2
# lists, each selecting that test case and no other. Run by CTest itself (tests/CMakeLists.txt).
# Usage: cmake -DCTEST=<ctest> -DBUILD_DIR=<top build dir> -DEXECUTABLE=<ember_tests> [-DPREFIX=<TEST_PREFIX>]
#        -P check_ctest_entries.cmake
#
# Names are compared as whole strings, never as CMake lists: a list would split a name at ';' and join
# names across an unbalanced '[', the very mangling this check is there to catch.
foreach(var CTEST BUILD_DIR EXECUTABLE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_ctest_entries.cmake: pass -D${var}=...")
  endif()
endforeach()

# Listing needs no BLAS threads; sparing their start-up makes the ~200 listings below quicker.
set(ENV{OPENBLAS_NUM_THREADS} 1)
execute_process(COMMAND "${EXECUTABLE}" --list-test-names-only OUTPUT_VARIABLE listed RESULT_VARIABLE rc)
if(rc LESS 1)
  message(FATAL_ERROR "${EXECUTABLE} --list-test-names-only listed no test case (exit ${rc})")
endif()
string(REGEX MATCHALL "\n" newlines "${listed}")
list(LENGTH newlines catch_count)
set(listed_lines "\n${listed}")

execute_process(COMMAND "${CTEST}" --show-only=json-v1 WORKING_DIRECTORY "${BUILD_DIR}"
                OUTPUT_VARIABLE json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ctest --show-only=json-v1 in ${BUILD_DIR} failed (exit ${rc})")
endif()
string(JSON entry_count LENGTH "${json}" tests)

set(errors "")
set(ctest_count 0)
math(EXPR last "${entry_count} - 1")
foreach(i RANGE ${last})
  # Entries without a command (a test executable not built in this tree) belong to no executable.
  string(JSON program ERROR_VARIABLE no_command GET "${json}" tests ${i} command 0)
  if(no_command OR NOT program STREQUAL EXECUTABLE)
    continue()
  endif()
  math(EXPR ctest_count "${ctest_count} + 1")
  string(JSON name GET "${json}" tests ${i} name)
  if(DEFINED PREFIX)
    string(LENGTH "${PREFIX}" prefix_length)
    string(SUBSTRING "${name}" 0 ${prefix_length} head)
    if(NOT head STREQUAL PREFIX)
      string(APPEND errors "\n  CTest entry '${name}' lacks the prefix '${PREFIX}'")
    endif()
    string(SUBSTRING "${name}" ${prefix_length} -1 name)
  endif()
  string(JSON spec GET "${json}" tests ${i} command 1)
  string(FIND "${listed_lines}" "\n${name}\n" at)
  if(at EQUAL -1)
    string(APPEND errors "\n  CTest entry '${name}' is no test case's name")
  endif()
  # The entry's own test spec, given back to the executable, must select its test case and only it.
  execute_process(COMMAND "${EXECUTABLE}" "${spec}" --list-test-names-only OUTPUT_VARIABLE selected)
  if(NOT selected STREQUAL "${name}\n")
    string(REPLACE "\n" " | " shown "${selected}")
    string(APPEND errors "\n  CTest entry '${name}' runs test spec '${spec}', which selects: '${shown}'")
  endif()
endforeach()

if(NOT ctest_count EQUAL catch_count)
  string(APPEND errors "\n  ${EXECUTABLE} lists ${catch_count} test cases but CTest has ${ctest_count} entries for it")
endif()
if(NOT errors STREQUAL "")
  message(FATAL_ERROR "CTest does not run each test case exactly once:${errors}\n"
                      "Fix the test names: catch_discover_tests splits a name at ';' and cannot pass "
                      "unbalanced '[' or ']', '\\' or '\"' through to Catch2 intact.")
endif()
message(STATUS "${catch_count} test cases listed, ${ctest_count} CTest entries, each selecting its own test case")

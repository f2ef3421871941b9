# A ctest of the thread-safety check: runs scripts/thread_safety.py --plant FILE (FILE compiled
# as the build's own sources are, with -Wthread-safety -Werror) and asserts that it refuses
# FILE with output matching EXPECT (EXPECT empty: that it accepts FILE).
#   cmake -DPYTHON=... -DSCRIPT=<scripts/thread_safety.py> -DBUILD_DIR=... -DFILE=...
#         [-DEXPECT=<regex>] -P plant.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var PYTHON SCRIPT BUILD_DIR FILE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "plant.cmake: -D${var}= is required")
  endif()
endforeach()
execute_process(COMMAND ${PYTHON} ${SCRIPT} ${BUILD_DIR} --plant ${FILE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT EXPECT)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the check refused ${FILE}, which is right:\n${out}")
  endif()
  message(STATUS "accepted as expected: ${FILE}")
  return()
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the check accepted ${FILE}, a planted violation:\n${out}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the check refused ${FILE}, but not for '${EXPECT}':\n${out}")
endif()
message(STATUS "refused as expected: ${FILE}")

# A ctest of the layer check (cmake/CheckLayers.cmake): copies src/kforge to SCRATCH, appends
# LINE to FILE there (creating it if absent), runs the check on the copy and asserts that it
# fails with output matching EXPECT (EXPECT empty: asserts that it passes).
#   cmake -DMANIFEST=... -DROOT=<src/kforge> -DSCRATCH=<dir> -DFILE=<rel path> -DLINE=<text>
#         [-DEXPECT=<regex>] -P plant_include.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var MANIFEST ROOT SCRATCH FILE LINE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "plant_include.cmake: -D${var}= is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${SCRATCH})
file(MAKE_DIRECTORY ${SCRATCH})
file(COPY ${ROOT}/ DESTINATION ${SCRATCH}/kforge)
file(APPEND ${SCRATCH}/kforge/${FILE} "\n${LINE}\n")
get_filename_component(here ${CMAKE_CURRENT_LIST_FILE} DIRECTORY)
execute_process(
  COMMAND ${CMAKE_COMMAND} -DMANIFEST=${MANIFEST} -DROOT=${SCRATCH}/kforge
          -P ${here}/../../cmake/CheckLayers.cmake
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
file(REMOVE_RECURSE ${SCRATCH})
if(NOT EXPECT)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the check rejected '${LINE}' in ${FILE}, which is allowed:\n${out}")
  endif()
  message(STATUS "allowed as expected: '${LINE}' in ${FILE}")
  return()
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the check passed '${LINE}' planted in ${FILE}:\n${out}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the check failed, but its output does not match '${EXPECT}':\n${out}")
endif()
message(STATUS "rejected as expected: '${LINE}' in ${FILE}")

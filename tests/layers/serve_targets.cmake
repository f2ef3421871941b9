# ctest layers.serve_builds_no_tests: what `make serve` builds (Makefile SERVE_TARGETS)
# compiles the server, the two libraries it loads and the layer check, and nothing of
# tests/ or bench/ (no gtest, fuzzers, benchmarks).
#   cmake -DNINJA=<ninja> -DBUILD_DIR=<build> -DMAKEFILE=<Makefile> -P serve_targets.cmake
cmake_minimum_required(VERSION 3.25)
file(STRINGS ${MAKEFILE} line REGEX "^SERVE_TARGETS[ \t]*:=")
string(REGEX REPLACE "^SERVE_TARGETS[ \t]*:=[ \t]*" "" targets "${line}")
separate_arguments(targets)
if(NOT targets)
  message(FATAL_ERROR "no SERVE_TARGETS := line in ${MAKEFILE}")
endif()
execute_process(COMMAND ${NINJA} -C ${BUILD_DIR} -t commands ${targets}
  RESULT_VARIABLE rc OUTPUT_VARIABLE commands ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ninja -t commands ${targets} failed: ${err}")
endif()
foreach(needed "apps/kforge/main.cc" "cuda/abi/kforge_cuda.cc" "sandbox/abi/kforge_sandbox.cc"
               "CheckLayers.cmake")
  string(FIND "${commands}" "${needed}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "make serve (${targets}) does not build ${needed}")
  endif()
endforeach()
# A unity build (the release preset) compiles bench/'s targets as
# bench/CMakeFiles/<target>.dir/Unity/unity_N_cxx.cxx, which the last alternative matches.
string(REGEX MATCHALL
  "[^ \n]*(tests/unit|tests/fuzz|/bench/[a-z_]+_bench\\.cc|gtest|[ \n]bench/CMakeFiles/)[^ \n]*"
  extra "${commands}")
if(extra)
  list(SUBLIST extra 0 6 extra)
  list(REMOVE_DUPLICATES extra)
  message(FATAL_ERROR "make serve (${targets}) builds test or benchmark code: ${extra}")
endif()
string(REGEX MATCHALL "\n" n "${commands}")
list(LENGTH n count)
message(STATUS "make serve: ${count} commands for ${targets}, none of tests/ or bench/")

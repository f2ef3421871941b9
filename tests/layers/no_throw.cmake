# ctest invariants.no_throw_no_assert: no C++ under src/kforge or apps/kforge throws or uses
# assert(). Errors are a Status; a broken invariant is KF_CHECK / StatusOr::value(), which abort
# in every build (docs/architecture.md, "Error policy"). A throw became a 500 on some threads
# and ended the process on others; an assert is compiled out of release builds.
#   cmake -DROOTS="<dir>;<dir>" -P no_throw.cmake
cmake_minimum_required(VERSION 3.25)
set(offences)
set(count 0)
foreach(root IN LISTS ROOTS)
  file(GLOB_RECURSE files ${root}/*.h ${root}/*.cc)
  foreach(file IN LISTS files)
    math(EXPR count "${count} + 1")
    file(READ ${file} text)
    string(REPLACE ";" "\\;" text "${text}")  # one list element per line
    string(REPLACE "\n" ";" lines "${text}")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "//.*$" "" code "${line}")  # comments may say "throw"
      if(code MATCHES "(^|[^A-Za-z0-9_])(throw([ \t;(]|$)|assert[ \t]*\\()")
        list(APPEND offences "${file}: ${line}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "no sources under ${ROOTS}")
endif()
if(offences)
  list(JOIN offences "\n  " text)
  message(FATAL_ERROR "throw or assert() in kforge's C++ (return a Status, or KF_CHECK):\n  ${text}")
endif()
message(STATUS "${count} files: no throw, no assert()")

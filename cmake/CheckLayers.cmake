# cmake -DMANIFEST=<build>/layers/manifest.cmake -DROOT=<tree>/src/kforge -P CheckLayers.cmake
#
# Fails (listing every offence) when a source or header under ROOT
#  - lies in a directory that belongs to no library of the manifest, or
#  - includes "kforge/<dir>/<file>" where <dir> belongs to no library, or to a library that
#    is not the including file's own library nor one of its DEPS (transitively).
# Written by cmake/Layers.cmake; the ctests layers_* run it on the tree and on planted edges.
cmake_minimum_required(VERSION 3.25)  # script mode: IN_LIST, list(POP_FRONT)
if(NOT MANIFEST OR NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DMANIFEST=<manifest.cmake> -DROOT=<src/kforge> -P CheckLayers.cmake")
endif()
include(${MANIFEST})
get_filename_component(ROOT ${ROOT} ABSOLUTE)

foreach(layer IN LISTS KFORGE_LAYERS)
  foreach(dir IN LISTS KFORGE_LAYER_DIRS_${layer})
    set(owner_${dir} ${layer})
  endforeach()
endforeach()

file(GLOB_RECURSE files RELATIVE ${ROOT} ${ROOT}/*.h ${ROOT}/*.cc)
list(SORT files)
if(NOT files)
  message(FATAL_ERROR "layer check: no sources under ${ROOT}")
endif()
set(offences)
set(edges 0)
foreach(file IN LISTS files)
  get_filename_component(dir ${file} DIRECTORY)
  if(NOT DEFINED owner_${dir})
    list(APPEND offences "${file}: its directory ${dir}/ belongs to no library (src/kforge/CMakeLists.txt)")
    continue()
  endif()
  set(layer ${owner_${dir}})
  file(STRINGS ${ROOT}/${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]kforge/")
  foreach(line IN LISTS includes)
    string(REGEX MATCH "kforge/([^\">]+)/[^/\">]+[\">]" _ "${line}")
    set(target_dir ${CMAKE_MATCH_1})
    if(NOT target_dir)
      list(APPEND offences "${file}: ${line}: not a kforge/<directory>/<file> include")
      continue()
    endif()
    math(EXPR edges "${edges} + 1")
    if(NOT DEFINED owner_${target_dir})
      list(APPEND offences "${file}: ${line}: ${target_dir}/ belongs to no library")
    elseif(NOT "${owner_${target_dir}}" IN_LIST KFORGE_LAYER_REACH_${layer})
      list(APPEND offences
        "${file} (${layer}) includes ${target_dir}/ (${owner_${target_dir}}), which is not among its DEPS: ${KFORGE_LAYER_DEPS_${layer}}")
    endif()
  endforeach()
endforeach()

list(LENGTH files nfiles)
if(offences)
  list(LENGTH offences n)
  list(JOIN offences "\n  " text)
  message(FATAL_ERROR "layer check: ${n} wrong include(s) in ${ROOT}:\n  ${text}\n"
    "A library may include only its own headers and those of its DEPS "
    "(docs/architecture.md, \"Layers\").")
endif()
message(STATUS "layer check: ${nfiles} files, ${edges} kforge includes, no back-edge")

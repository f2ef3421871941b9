# Unity builds (the release, asan, tsan and fuzz presets set CMAKE_UNITY_BUILD): CMake compiles
# a target's sources as a few large TUs of CMAKE_UNITY_BUILD_BATCH_SIZE files each instead of
# one TU per file: half the CPU seconds of the release build from scratch (README, Development).
# One TU holds several files' anonymous namespaces, so the files that define an internal helper
# under the same name as another file compile on their own; so do the two ABI libraries' single
# sources and apps/kforge/main.cc (its own CMakeLists), which tests/layers'
# serve_builds_no_tests finds by name in the build commands.
# Source file properties are per directory: each directory that compiles these files calls
#   kforge_unity_standalone(<directory of src/kforge>)
set(kforge_unity_standalone_sources
  bench/kernel_library.cc cuda/abi/kforge_cuda.cc cuda/driver_api.cc
  frontends/http/http_session.cc frontends/mcp/bench_tool.cc
  frontends/mcp/fixtures/conformance_tools.cc jobs/ncu_report.cc sandbox/abi/kforge_sandbox.cc
  store/postgres/postgres_shared_queue.cc store/postgres/postgres_store.cc)

function(kforge_unity_standalone kforge_dir)
  list(TRANSFORM kforge_unity_standalone_sources PREPEND ${kforge_dir}/ OUTPUT_VARIABLE files)
  set_source_files_properties(${files} ${ARGN} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

# Third-party dependencies, all from Debian 12 packages (see README / scripts/setup.sh).
find_package(Threads REQUIRED)
find_package(Boost 1.81 REQUIRED)            # header-only: Asio, Beast
find_package(nlohmann_json 3.11 REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(GTest CONFIG)
find_package(benchmark CONFIG)

# fmt and spdlog: Debian ships only shared libraries, so use them header-only
# (FMT_HEADER_ONLY). The presets turn src/kforge's precompiled header off
# (CMAKE_DISABLE_PRECOMPILE_HEADERS, preset "base"): measured with GCC 12 on the 2-core CI machine
# (CPU seconds, RelWithDebInfo), the 166 MB PCH costs every TU ~9 s to load (common/base64.cc
# 10.1 s with it, 0.5 s without; model/request.cc 9.7 vs 1.6; model/parse.cc 17.8 vs 10.3) and
# saves nothing in the heaviest (jobs/job_service_impl.cc 24.3 vs 23.6).
find_path(FMT_INCLUDE_DIR fmt/format.h REQUIRED)
find_path(SPDLOG_INCLUDE_DIR spdlog/spdlog.h REQUIRED)
add_library(kforge_fmt_spdlog INTERFACE)
target_include_directories(kforge_fmt_spdlog SYSTEM INTERFACE ${FMT_INCLUDE_DIR} ${SPDLOG_INCLUDE_DIR})
target_compile_definitions(kforge_fmt_spdlog INTERFACE FMT_HEADER_ONLY SPDLOG_FMT_EXTERNAL)

# Static archives so the binary carries them.
find_library(SQLITE3_STATIC NAMES libsqlite3.a REQUIRED)
find_path(SQLITE3_INCLUDE_DIR sqlite3.h REQUIRED)
add_library(kforge_sqlite3 INTERFACE)
target_include_directories(kforge_sqlite3 SYSTEM INTERFACE ${SQLITE3_INCLUDE_DIR})
target_link_libraries(kforge_sqlite3 INTERFACE ${SQLITE3_STATIC} ${CMAKE_DL_LIBS} Threads::Threads m)

# libpq (the PostgreSQL store), linked dynamically: Debian's libpq.a needs libraries
# (GSSAPI, LDAP, libpgcommon) that have no static archives, so the static GPU build
# (scripts/package-gpu.sh) turns KFORGE_WITH_POSTGRESQL off instead.
if(KFORGE_WITH_POSTGRESQL)
  find_package(PostgreSQL REQUIRED)
endif()

find_library(CRYPTO_STATIC NAMES libcrypto.a REQUIRED)
add_library(kforge_crypto INTERFACE)
target_link_libraries(kforge_crypto INTERFACE ${CRYPTO_STATIC} ${CMAKE_DL_LIBS} Threads::Threads)

# CUDA headers (cuda.h, nvrtc.h) come from the CUDA 13 PyPI wheels in the venv; the
# libraries themselves are dlopen'ed at run time. KFORGE_CUDA_INCLUDE_DIR may be set by
# scripts/setup.sh; without it the CUDA backend builds its own minimal declarations.
set(KFORGE_VENV "$ENV{KFORGE_VENV}")
if(NOT KFORGE_VENV)
  set(KFORGE_VENV "$ENV{HOME}/.cache/kforge/venv")
endif()
file(GLOB _kforge_cuda_candidates
  "${KFORGE_VENV}/lib/python3*/site-packages/nvidia/cu13/include"
  "/usr/local/cuda/include")
find_path(KFORGE_CUDA_INCLUDE_DIR NAMES cuda.h nvrtc.h PATHS ${_kforge_cuda_candidates}
  NO_DEFAULT_PATH DOC "Directory holding cuda.h and nvrtc.h")
# cupti.h (CUPTI activity API, dlopen'ed like the rest) pulls in crt/host_defines.h, which
# CUDA 13 ships in the nvidia-cuda-crt wheel (python/requirements.txt). A venv set up before
# that wheel was listed still has the copy Triton bundles.
file(GLOB _kforge_crt_candidates
  "${KFORGE_CUDA_INCLUDE_DIR}"
  "${KFORGE_VENV}/lib/python3*/site-packages/triton/backends/nvidia/include"
  "/usr/local/cuda/include")
find_path(KFORGE_CUDA_CRT_INCLUDE_DIR NAMES crt/host_defines.h PATHS ${_kforge_crt_candidates}
  NO_DEFAULT_PATH DOC "Directory holding crt/host_defines.h (for cupti.h)")

# Warnings as errors for our own targets (third-party headers are SYSTEM includes).
add_library(kforge_warnings INTERFACE)
target_compile_options(kforge_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wunused -Woverloaded-virtual -Wdouble-promotion -Wformat=2
  -Wimplicit-fallthrough -Wmisleading-indentation)
if(KFORGE_WERROR)
  target_compile_options(kforge_warnings INTERFACE -Werror)
endif()

if(KFORGE_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 at -O1 with ASan reports -Wmaybe-uninitialized inside libstdc++'s <regex>
    # (std::function moved in _NFA::_M_insert_subexpr_end, store/postgres/pg_connection.cc): a
    # false positive GCC's manual warns of under -fsanitize; the release build keeps the warning.
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
elseif(KFORGE_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # Boost.Asio (third-party) calls std::atomic_thread_fence, which GCC 12 warns ThreadSanitizer
    # does not model (-Wtsan, an error under -Werror). Only the targets that include Boost
    # (frontends/http, the apps, their tests) get the flag; a race TSan then reports inside Asio
    # is suppressed, with the reason, in tests/sanitizers/tsan.supp.
    set_property(TARGET Boost::headers APPEND PROPERTY INTERFACE_COMPILE_OPTIONS -Wno-tsan)
  endif()
endif()

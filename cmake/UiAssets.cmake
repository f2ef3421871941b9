# The web UI's files (ui/) embedded as a generated source, for GET /ui
# (frontends/http/ui_route.h): src/kforge's build and the fuzz build both compile it.
#   kforge_ui_source(<out var>)
function(kforge_ui_source OUT_VAR)
  file(GLOB files CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/ui
    ${PROJECT_SOURCE_DIR}/ui/*.html ${PROJECT_SOURCE_DIR}/ui/*.js ${PROJECT_SOURCE_DIR}/ui/*.css
    ${PROJECT_SOURCE_DIR}/ui/*.svg)
  list(TRANSFORM files PREPEND ${PROJECT_SOURCE_DIR}/ui/ OUTPUT_VARIABLE paths)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/generated/ui_files.cc)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR}/ui -DOUT=${out}
            "-DFILES=${files}" -DNAMESPACE=kforge::frontends::http
            -DHEADER=kforge/frontends/http/ui_assets.h -DFUNCTION=ui_files
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedFiles.cmake
    DEPENDS ${paths} ${PROJECT_SOURCE_DIR}/cmake/EmbedFiles.cmake
    COMMENT "Embedding the web UI" VERBATIM)
  set(${OUT_VAR} ${out} PARENT_SCOPE)
endfunction()

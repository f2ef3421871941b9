# The workbench's knowledge base (knowledge/) and the library kernels its templates are made
# of, compiled in (cmake/EmbedFiles.cmake -> workbench/embedded_files.h). Sets OUT_VAR to the
# generated source that defines them, built in the calling directory's binary dir.
function(kforge_knowledge_source OUT_VAR)
  file(GLOB_RECURSE files CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
    ${PROJECT_SOURCE_DIR}/knowledge/*.md ${PROJECT_SOURCE_DIR}/knowledge/*.json
    ${PROJECT_SOURCE_DIR}/knowledge/*.py)
  list(APPEND files kernels/add/v4_optimized.py kernels/softmax/v4_optimized.py
    kernels/mha/v4_optimized.py kernels/interpreter_compat.py)
  list(TRANSFORM files PREPEND ${PROJECT_SOURCE_DIR}/ OUTPUT_VARIABLE paths)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/generated/knowledge_files.cc)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -DOUT=${out}
            "-DFILES=${files}" -P ${PROJECT_SOURCE_DIR}/cmake/EmbedFiles.cmake
    DEPENDS ${paths} ${PROJECT_SOURCE_DIR}/cmake/EmbedFiles.cmake
    COMMENT "Embedding the knowledge base" VERBATIM)
  set(${OUT_VAR} ${out} PARENT_SCOPE)
endfunction()

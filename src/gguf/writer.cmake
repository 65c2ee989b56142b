# The GGUF writer (tests, fuzz seeds, tools); included by src/gguf/CMakeLists.txt.
target_sources(tessera_gguf PRIVATE ${CMAKE_CURRENT_LIST_DIR}/gguf_writer.cpp)

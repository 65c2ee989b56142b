# B-grammar (owner: grammar): bench_grammar, structured-output compile time per schema and per-token
# mask time for each vocabulary given (SmolLM2 49k, Qwen2.5 152k).
add_executable(bench_grammar ${CMAKE_CURRENT_LIST_DIR}/../bench_grammar.cpp)
target_link_libraries(bench_grammar PRIVATE tessera_engine tessera_grammar)
target_compile_definitions(bench_grammar PRIVATE TESSERA_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

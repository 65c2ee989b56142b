# B9 speculative decoding (owner: spec): bench_spec drives the public Engine with and without
# speculation, interleaved (see bench/bench_spec.cpp for the command line).
add_executable(bench_spec ${CMAKE_CURRENT_LIST_DIR}/../bench_spec.cpp)
target_compile_definitions(bench_spec PRIVATE TESSERA_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(bench_spec PRIVATE tessera_engine)

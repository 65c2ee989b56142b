# Single-stream speed (owner: perf): make_synthetic_gguf writes the random-weight TinyLlama-shaped
# GGUF that bench/bench_llama_cpp.py (B1/B2 vs llama.cpp) runs beside SmolLM2; see bench/README.md.
if(TARGET tessera_gguf AND TARGET tessera_kernels)
  add_executable(make_synthetic_gguf ${CMAKE_CURRENT_LIST_DIR}/../make_synthetic_gguf.cpp)
  target_link_libraries(make_synthetic_gguf PRIVATE tessera_gguf tessera_kernels)
endif()
# Tests of the speed paths (ThreadPool::for_chunks, matmul_group, inline matmul): bit-exact vs the
# scalar twins. Registered here because tests/kernels' CMakeLists belongs to another owner.
if(TESSERA_BUILD_TESTS AND TARGET tessera_kernels AND COMMAND tessera_add_test)
  tessera_add_test(test_perf_paths SOURCES ${CMAKE_SOURCE_DIR}/tests/perf/test_perf_paths.cpp LABEL kernel
                   DEPS tessera_kernels)
  target_include_directories(test_perf_paths PRIVATE ${CMAKE_SOURCE_DIR}/tests)
endif()

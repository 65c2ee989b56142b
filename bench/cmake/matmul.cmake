# Kernel benchmarks and machine probes (owner: quant): bench_matmul (matmul GB/s on SmolLM2's
# shapes), probe_bandwidth (sustained read GB/s), probe_compute (peak FMA GFLOP/s, int8 GOP/s).
add_executable(bench_matmul ${CMAKE_CURRENT_LIST_DIR}/../bench_matmul.cpp)
target_link_libraries(bench_matmul PRIVATE tessera_kernels)
add_executable(probe_bandwidth ${CMAKE_CURRENT_LIST_DIR}/../probe_bandwidth.cpp)
target_link_libraries(probe_bandwidth PRIVATE tessera_util)
add_executable(probe_compute ${CMAKE_CURRENT_LIST_DIR}/../probe_compute.cpp)
target_link_libraries(probe_compute PRIVATE tessera_util)
# probe_amx_overlap: whether the AMX tile unit and the AVX-512 float units overlap (they bound the
# AMX matmul kernel: bench/README.md, B4).
add_executable(probe_amx_overlap ${CMAKE_CURRENT_LIST_DIR}/../probe_amx_overlap.cpp)
target_link_libraries(probe_amx_overlap PRIVATE tessera_util)

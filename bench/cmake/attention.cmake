# B3 (owner: attn): bench_attention, flash vs naive paged attention, decode depths 1k-16k and
# prefill 512-16k on a synthetic long-context shape and on SmolLM2's; --quick for a smoke run.
add_executable(bench_attention ${CMAKE_CURRENT_LIST_DIR}/../bench_attention.cpp)
target_link_libraries(bench_attention PRIVATE tessera_kernels)
# probe_batched_attention: one batched decode step's attention (SmolLM2 shape, 30 layers) alone.
add_executable(probe_batched_attention ${CMAKE_CURRENT_LIST_DIR}/../probe_batched_attention.cpp)
target_link_libraries(probe_batched_attention PRIVATE tessera_kernels)

# Engine benchmarks (owner: enginetest); commands in bench/README.md.
# B4 bench_batched_decode (+ llama.cpp peer bench/llama_batched_decode.py), B6/B7 bench_kv_capacity
# (scheduler + KV manager with a fake runner: exact block counts), B8 bench_prefix_cache.
if(TARGET tessera_engine)
  add_executable(bench_batched_decode ${CMAKE_CURRENT_LIST_DIR}/../bench_batched_decode.cpp)
  target_link_libraries(bench_batched_decode PRIVATE tessera_engine)
  add_executable(bench_prefix_cache ${CMAKE_CURRENT_LIST_DIR}/../bench_prefix_cache.cpp)
  target_link_libraries(bench_prefix_cache PRIVATE tessera_engine)
endif()
if(TARGET tessera_sched)
  add_executable(bench_kv_capacity ${CMAKE_CURRENT_LIST_DIR}/../bench_kv_capacity.cpp)
  target_link_libraries(bench_kv_capacity PRIVATE tessera_sched)
endif()

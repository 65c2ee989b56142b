# Weight types, matmul and element-wise ops (owner: quant). Included by src/kernels/CMakeLists.txt.
target_sources(tessera_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ops_ref.cpp)
tessera_kernel_isa_sources(avx2 ${CMAKE_CURRENT_LIST_DIR}/x86/ops_avx2.cpp)

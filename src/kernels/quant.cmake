# Weight types, matmul and element-wise ops (owner: quant). Included by src/kernels/CMakeLists.txt.
# Every file here builds with -ffp-contract=off: the fast and scalar paths must round alike (no
# silent a*b+c -> fma contraction), which the bit-exact fast-vs-ref tests rely on.
set(TESSERA_QUANT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ops_ref.cpp
  ${CMAKE_CURRENT_LIST_DIR}/quant.cpp
  ${CMAKE_CURRENT_LIST_DIR}/quant_ref.cpp
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/matmul_pack.cpp
  ${CMAKE_CURRENT_LIST_DIR}/matmul_ref.cpp)
set(TESSERA_QUANT_AVX2_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/x86/ops_avx2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/x86/quant_avx2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/x86/matmul_avx2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/x86/matmul_packed_avx2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/x86/matmul_packed_kquant_avx2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/x86/matmul_kquant_avx2.cpp)
set(TESSERA_QUANT_AVX512_SOURCES ${CMAKE_CURRENT_LIST_DIR}/x86/matmul_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/x86/matmul_packed_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/x86/matmul_packed_kquant_avx512.cpp)
set(TESSERA_QUANT_AMX_SOURCES ${CMAKE_CURRENT_LIST_DIR}/x86/matmul_packed_amx.cpp)
target_sources(tessera_kernels PRIVATE ${TESSERA_QUANT_SOURCES})
set_property(SOURCE ${TESSERA_QUANT_SOURCES} APPEND PROPERTY COMPILE_OPTIONS -ffp-contract=off)
tessera_kernel_isa_sources(avx2 ${TESSERA_QUANT_AVX2_SOURCES})
tessera_kernel_isa_sources(avx512 ${TESSERA_QUANT_AVX512_SOURCES})
tessera_kernel_isa_sources(amx ${TESSERA_QUANT_AMX_SOURCES})
if(NOT TESSERA_FORCE_SCALAR)
  set_property(SOURCE ${TESSERA_QUANT_AVX2_SOURCES} ${TESSERA_QUANT_AVX512_SOURCES} ${TESSERA_QUANT_AMX_SOURCES}
               APPEND PROPERTY COMPILE_OPTIONS -ffp-contract=off)
endif()

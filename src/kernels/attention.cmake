# Paged attention: flash driver + scalar tile kernels + naive twin; AVX2 / AVX-512 tile kernels.
# -ffp-contract=off: no implicit FMA contraction, so each row's operation order is exactly the one
# written (batch invariance needs the same bits from every call site).
set(TESSERA_ATTENTION_SOURCES attention.cpp attention_naive.cpp attention_tile_ref.cpp attention_workspace.cpp)
target_sources(tessera_kernels PRIVATE ${TESSERA_ATTENTION_SOURCES})
set_property(SOURCE ${TESSERA_ATTENTION_SOURCES} APPEND PROPERTY COMPILE_OPTIONS -ffp-contract=off)
tessera_kernel_isa_sources(avx2 x86/attention_avx2.cpp x86/attention_direct_avx2.cpp)
tessera_kernel_isa_sources(avx512 x86/attention_avx512.cpp x86/attention_direct_avx512.cpp)
if(NOT TESSERA_FORCE_SCALAR)
  set_property(SOURCE x86/attention_avx2.cpp x86/attention_direct_avx2.cpp x86/attention_avx512.cpp x86/attention_direct_avx512.cpp APPEND PROPERTY
               COMPILE_OPTIONS -ffp-contract=off)
endif()

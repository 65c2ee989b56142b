# Paged attention tests (see tests/kernels/test_attention*.cpp).
tessera_add_test(test_kernels_attention
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_attention.cpp ${CMAKE_CURRENT_SOURCE_DIR}/test_attention_invariance.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/test_attention_window.cpp
  LABEL kernel DEPS tessera_kernels)

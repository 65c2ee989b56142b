# Tests of the weight types, matmul and element-wise ops (owner: quant).
tessera_add_test(test_kernels_ops SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ops.cpp LABEL kernel
                 DEPS tessera_kernels)

# Tests of the weight types, matmul and element-wise ops (owner: quant).
tessera_add_test(test_kernels_ops SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ops.cpp LABEL kernel
                 DEPS tessera_kernels)
tessera_add_test(test_kernels_quant SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant.cpp LABEL kernel
                 DEPS tessera_kernels)
tessera_add_test(test_kernels_matmul SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_matmul.cpp
                 LABEL kernel DEPS tessera_kernels)
target_include_directories(test_kernels_quant PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_include_directories(test_kernels_matmul PRIVATE ${CMAKE_SOURCE_DIR}/tests)

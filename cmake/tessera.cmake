# tessera_add_library(NAME SOURCES... DEPS...): one static library per src/ folder.
# tessera_add_test(NAME SOURCES src... LABEL unit|kernel|golden|e2e|model [DEPS libs...])
#   LABEL unit, kernel and golden run by default (no downloads); e2e and model need the real
#   SmolLM2 model and run under their label.

# A copy of ../shared/testdata (tiny stories260K model, llama.cpp tokenizer vectors) lives in
# tests/data, so a clone anywhere runs its tests.
set(TESSERA_TESTDATA_DIR "${CMAKE_SOURCE_DIR}/tests/data" CACHE PATH "test models and tokenizer vectors")
set(TESSERA_PROJECT_TESTDATA_DIR "${CMAKE_SOURCE_DIR}/tests/data" CACHE PATH "project test data")

function(tessera_add_test name)
  cmake_parse_arguments(T "" "LABEL;TIMEOUT" "SOURCES;DEPS" ${ARGN})
  if(NOT T_LABEL)
    set(T_LABEL unit)
  endif()
  if(NOT T_TIMEOUT)
    # Generous: CI machines are small and shared; tests that hang still end.
    if(T_LABEL STREQUAL "model")
      set(T_TIMEOUT 1800)
    elseif(T_LABEL STREQUAL "golden")
      set(T_TIMEOUT 900)
    else()
      set(T_TIMEOUT 600)
    endif()
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    TESSERA_TESTDATA_DIR="${TESSERA_TESTDATA_DIR}"
    TESSERA_PROJECT_TESTDATA_DIR="${TESSERA_PROJECT_TESTDATA_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS ${T_LABEL} TIMEOUT ${T_TIMEOUT})
endfunction()

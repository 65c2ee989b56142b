# tessera_add_library(NAME SOURCES... DEPS...): one static library per src/ folder.
# tessera_add_test(NAME SOURCES src... LABEL unit|kernel|golden|e2e|model [SANITIZED] [DEPS libs...])
#   LABEL unit, kernel and golden run by default (no downloads); e2e and model need the real
#   SmolLM2 model and run under their label. SANITIZED adds the label `sanitized`: the ASan + UBSan
#   stage of scripts/test.sh runs it (beside every `unit` test). The main() is tests/common's: it
#   lists skips and fails on them under TESSERA_NO_SKIP=1 (CI).

# A copy of ../shared/testdata (tiny stories260K model, llama.cpp tokenizer vectors) lives in
# tests/data, so a clone anywhere runs its tests.
set(TESSERA_TESTDATA_DIR "${CMAKE_SOURCE_DIR}/tests/data" CACHE PATH "test models and tokenizer vectors")
set(TESSERA_PROJECT_TESTDATA_DIR "${CMAKE_SOURCE_DIR}/tests/data" CACHE PATH "project test data")

function(tessera_add_test name)
  cmake_parse_arguments(T "SANITIZED" "LABEL;TIMEOUT" "SOURCES;DEPS" ${ARGN})
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
  target_link_libraries(${name} PRIVATE ${T_DEPS} GTest::gtest tessera_test_main)
  target_compile_definitions(${name} PRIVATE
    TESSERA_TESTDATA_DIR="${TESSERA_TESTDATA_DIR}"
    TESSERA_PROJECT_TESTDATA_DIR="${TESSERA_PROJECT_TESTDATA_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  set(labels ${T_LABEL})
  if(T_SANITIZED)
    list(APPEND labels sanitized)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${T_TIMEOUT})
endfunction()

# The module table, src/layers.txt ("module: the modules it may include"): TESSERA_LAYER_<module>.
file(STRINGS ${CMAKE_SOURCE_DIR}/src/layers.txt tessera_layer_lines)
set(TESSERA_LAYER_MODULES "")
foreach(line IN LISTS tessera_layer_lines)
  string(REGEX REPLACE "#.*" "" line "${line}")
  if(line MATCHES "^[ \t]*([a-z_]+):(.*)$")
    list(APPEND TESSERA_LAYER_MODULES ${CMAKE_MATCH_1})
    separate_arguments(deps UNIX_COMMAND "${CMAKE_MATCH_2}")
    set(TESSERA_LAYER_${CMAKE_MATCH_1} ${deps})
  endif()
endforeach()
set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/layers.txt)

# The library target of a module name of the table (`tessera` is the public API, include/tessera).
function(tessera_module_target out module)
  if(module STREQUAL "tessera")
    set(${out} tessera_api PARENT_SCOPE)
  else()
    set(${out} tessera_${module} PARENT_SCOPE)
  endif()
endfunction()

# tessera_module_includes(target module): `target` sees src/<module>/ as "<module>/..." through an
# include root of its own (build/module_include/<module>/<module> -> src/<module>), and links the
# modules the table lists for `module` (PUBLIC: their headers and links come along). No include
# root exposes all of src/, so including a module outside that set fails to compile.
function(tessera_module_includes target module)
  set(root ${CMAKE_BINARY_DIR}/module_include/${module})
  file(MAKE_DIRECTORY ${root})
  if(NOT EXISTS ${root}/${module})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${module} ${root}/${module} SYMBOLIC)
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set(scope PRIVATE)
  else()
    set(scope PUBLIC)
  endif()
  target_include_directories(${target} ${scope} ${root})
  foreach(dep IN LISTS TESSERA_LAYER_${module})
    tessera_module_target(dep_target ${dep})
    target_link_libraries(${target} ${scope} ${dep_target})
  endforeach()
endfunction()

# tessera_add_module(<module> SOURCES files... [LIBS <target_link_libraries args>]): the static
# library tessera_<module>, linking exactly the modules src/layers.txt lists for it, plus LIBS
# (outside libraries, or $<LINK_ONLY:...> for an implementation found at link time only).
function(tessera_add_module module)
  cmake_parse_arguments(M "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT module IN_LIST TESSERA_LAYER_MODULES)
    message(FATAL_ERROR "module '${module}' has no line in src/layers.txt")
  endif()
  add_library(tessera_${module} STATIC ${M_SOURCES})
  tessera_module_includes(tessera_${module} ${module})
  if(M_LIBS)
    target_link_libraries(tessera_${module} ${M_LIBS})
  endif()
endfunction()

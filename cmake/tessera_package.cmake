# The public library: libtessera, the engine behind include/tessera/ as one shared library, with an
# install rule, a CMake package (find_package(tessera) -> tessera::tessera) and a pkg-config file.
#
#   cmake --install build/release --prefix /opt/tessera
#   # CMake:      find_package(tessera REQUIRED)  target_link_libraries(app PRIVATE tessera::tessera)
#   # pkg-config: c++ -std=c++20 app.cpp $(pkg-config --cflags --libs tessera)
#
# What it holds: engine and the modules under it (their object files, compiled once and
# position-independent), so the public API's implementations are inside: tessera/status.h's
# functions (util/status.cpp), tessera/metrics.h's (engine/metrics.cpp), Engine::create and the
# rest of the engine facade (engine/). The server, kv_events and the CLI stay out: they are programs
# on top of the API, not part of it. The public headers include only the standard library, so a
# program that uses them needs nothing else on its include path (examples/ proves it in CI: it is
# built against the installed package only).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# engine and every module below it that it links, from src/layers.txt (a module added there comes
# along by itself).
set(TESSERA_LIBRARY_MODULES "")
set(pending engine)
while(pending)
  list(POP_FRONT pending module)
  if(module STREQUAL "tessera" OR module IN_LIST TESSERA_LIBRARY_MODULES)
    continue()
  endif()
  list(APPEND TESSERA_LIBRARY_MODULES ${module})
  list(APPEND pending ${TESSERA_LAYER_${module}})
endwhile()
set(tessera_library_objects "")
foreach(module IN LISTS TESSERA_LIBRARY_MODULES)
  list(APPEND tessera_library_objects $<TARGET_OBJECTS:tessera_${module}>)
endforeach()

# The target is tessera_library (the name `tessera` is the CLI's); its file is libtessera.so and
# its exported name tessera::tessera.
add_library(tessera_library SHARED)
# The modules' own object files (compiled once, position-independent) and the outside libraries
# they use; the module archives stay what the binary and the tests link.
target_sources(tessera_library PRIVATE ${CMAKE_SOURCE_DIR}/cmake/empty.cpp ${tessera_library_objects})
target_link_libraries(tessera_library PRIVATE fmt::fmt Threads::Threads xxhash)
target_include_directories(tessera_library PUBLIC
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(tessera_library PUBLIC cxx_std_20)
set_target_properties(tessera_library PROPERTIES
  OUTPUT_NAME tessera EXPORT_NAME tessera VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
if(NOT TESSERA_SANITIZE)  # (the sanitizer runtimes are the program's to supply)
  # A library must not leave symbols for the program to supply.
  target_link_options(tessera_library PRIVATE "-Wl,--no-undefined")
endif()
add_library(tessera::tessera ALIAS tessera_library)

install(TARGETS tessera_library EXPORT tesseraTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/tessera DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(TARGETS tessera RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT tesseraTargets NAMESPACE tessera:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/tesseraConfig.cmake.in
  ${CMAKE_BINARY_DIR}/tesseraConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tesseraConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/tesseraConfig.cmake ${CMAKE_BINARY_DIR}/tesseraConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
# tessera.pc finds its prefix from its own folder (relocatable): the way up from LIBDIR/pkgconfig.
file(RELATIVE_PATH TESSERA_PC_PREFIX_FROM_PCDIR "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
configure_file(${CMAKE_SOURCE_DIR}/cmake/tessera.pc.in ${CMAKE_BINARY_DIR}/tessera.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/tessera.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

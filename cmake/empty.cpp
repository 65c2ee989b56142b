// libtessera's own translation unit: the library is the module archives linked in whole
// (cmake/tessera_package.cmake); CMake needs at least one source for a library target.

# Serving load generator (see bench/serve/README.md): tessera-bench-serve, same as `tessera bench serve`.
if(TARGET tessera_server)
  add_executable(tessera-bench-serve ${CMAKE_SOURCE_DIR}/bench/serve/main.cpp)
  target_link_libraries(tessera-bench-serve PRIVATE tessera_server)
endif()

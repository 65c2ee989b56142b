// `tessera bench serve`: placeholder until the load generator lands.
#include <cstdio>

#include "server/server_main.h"

namespace tessera::server {
int bench_serve_main(int, char**) {
  std::fprintf(stderr, "tessera bench serve: not built yet\n");
  return 1;
}
}  // namespace tessera::server

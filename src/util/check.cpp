#include "util/check.h"

#include <cstdio>
#include <cstdlib>

namespace tessera {

void check_failed(const char* condition, const std::string& message, const char* file,
                  unsigned line, const char* function) {
  std::fprintf(stderr, "tessera: check failed at %s:%u (%s): %s %s\n", file, line, function,
               condition, message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera

#include "util/check.h"

#include <cstdio>
#include <cstdlib>

namespace tessera {

void check_failed(const char* condition, const std::string& message,
                  std::source_location where) {
  std::fprintf(stderr, "tessera: check failed at %s:%u (%s): %s %s\n", where.file_name(),
               static_cast<unsigned>(where.line()), where.function_name(), condition,
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera

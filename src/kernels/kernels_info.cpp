// Which kernel ISA this build and machine run (printed at start-up and by benchmarks).
#include "kernels/kernels_info.h"

#include "util/cpu_features.h"

namespace tessera::kernels {

std::string_view active_isa() { return isa_name(isa_level()); }

}  // namespace tessera::kernels

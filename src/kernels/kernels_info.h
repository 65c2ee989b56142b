#pragma once
#include <string_view>

namespace tessera::kernels {

// "scalar", "avx2" or "avx512": the path the dispatching kernels take now.
std::string_view active_isa();

}  // namespace tessera::kernels

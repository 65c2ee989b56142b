// What the CPU can run, read once with cpuid. Kernels pick their ISA from isa_level(), which the
// build switch TESSERA_FORCE_SCALAR and the environment variable TESSERA_ISA (scalar|avx2|avx512)
// can lower, so tests and benchmarks can run every path on one machine.
#pragma once
#include <string_view>

namespace tessera {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avxvnni = false;
};

enum class IsaLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

const CpuFeatures& cpu_features();

// The best level both the CPU and the build allow, lowered by TESSERA_ISA when set.
// kAvx2 needs avx2+fma+f16c; kAvx512 needs avx512 f/bw/vl/dq on top.
IsaLevel isa_level();
// Overrides isa_level() (tests compare paths); pass the detected level to restore.
void set_isa_level(IsaLevel level);
IsaLevel detected_isa_level();
std::string_view isa_name(IsaLevel level);

}  // namespace tessera

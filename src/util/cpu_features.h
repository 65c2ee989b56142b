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
  // AMX-TILE and AMX-INT8 in the CPU and tile state enabled in XCR0. Linux also wants a
  // per-process permission before the first tile instruction: see amx_tiles_usable().
  bool amx_int8 = false;
};

enum class IsaLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

const CpuFeatures& cpu_features();

// Whether this process may run AMX-INT8 tile instructions: the CPU and the OS support them and
// Linux granted the tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM, requested once, on the
// first call). False on other systems, and in the scalar-only build.
bool amx_tiles_usable();

// The best level both the CPU and the build allow, lowered by TESSERA_ISA when set.
// kAvx2 needs avx2+fma+f16c; kAvx512 needs avx512 f/bw/vl/dq on top.
IsaLevel isa_level();
// Overrides isa_level() (tests compare paths); pass the detected level to restore.
void set_isa_level(IsaLevel level);
IsaLevel detected_isa_level();
std::string_view isa_name(IsaLevel level);

}  // namespace tessera

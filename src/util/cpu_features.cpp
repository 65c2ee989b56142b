#include "util/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tessera {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  unsigned xcr0_lo = 0;
  if (osxsave) {
    unsigned xcr0_hi = 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  }
  const bool os_avx = (xcr0_lo & 0x6) == 0x6;
  const bool os_avx512 = (xcr0_lo & 0xe6) == 0xe6;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = os_avx && ((b >> 5) & 1);
    f.avx512f = os_avx512 && ((b >> 16) & 1);
    f.avx512dq = os_avx512 && ((b >> 17) & 1);
    f.avx512bw = os_avx512 && ((b >> 30) & 1);
    f.avx512vl = os_avx512 && ((b >> 31) & 1);
    f.avx512vnni = os_avx512 && ((c >> 11) & 1);
    const bool os_amx = ((xcr0_lo >> 17) & 3) == 3;  // XTILECFG and XTILEDATA
    f.amx_int8 = os_amx && ((d >> 24) & 1) && ((d >> 25) & 1);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avxvnni = os_avx && ((a >> 4) & 1);
    f.avx512bf16 = os_avx512 && ((a >> 5) & 1);
  }
  f.fma = f.fma && os_avx;
  f.f16c = f.f16c && os_avx;
#endif
  return f;
}

IsaLevel compute_detected() {
#if defined(TESSERA_FORCE_SCALAR)
  return IsaLevel::kScalar;
#else
  const CpuFeatures& f = cpu_features();
  IsaLevel level = IsaLevel::kScalar;
  if (f.avx2 && f.fma && f.f16c) level = IsaLevel::kAvx2;
  if (level == IsaLevel::kAvx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) {
    level = IsaLevel::kAvx512;
  }
  if (const char* env = std::getenv("TESSERA_ISA")) {
    const std::string want(env);
    IsaLevel cap = level;
    if (want == "scalar") cap = IsaLevel::kScalar;
    if (want == "avx2") cap = IsaLevel::kAvx2;
    if (static_cast<int>(cap) < static_cast<int>(level)) level = cap;
  }
  return level;
#endif
}

std::atomic<int> g_level{-1};

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool amx_tiles_usable() {
#if defined(TESSERA_FORCE_SCALAR) || !defined(__linux__) || !defined(__x86_64__)
  return false;
#else
  static const bool usable = [] {
    if (!cpu_features().amx_int8) return false;
    // Linux keeps the 8 KiB tile data out of a thread's saved state until the process asks
    // (kernel 5.16+); the permission then covers every thread of the process.
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
#endif
}

IsaLevel detected_isa_level() {
  static const IsaLevel level = compute_detected();
  return level;
}

IsaLevel isa_level() {
  int v = g_level.load(std::memory_order_relaxed);
  if (v < 0) return detected_isa_level();
  return static_cast<IsaLevel>(v);
}

void set_isa_level(IsaLevel level) {
  // Never above what the machine and the build can run.
  if (static_cast<int>(level) > static_cast<int>(detected_isa_level())) level = detected_isa_level();
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

std::string_view isa_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar: return "scalar";
    case IsaLevel::kAvx2: return "avx2";
    case IsaLevel::kAvx512: return "avx512";
  }
  return "?";
}

}  // namespace tessera

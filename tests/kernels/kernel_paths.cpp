// Prints which kernel paths this build runs on this host, i.e. which ones the kernel tests compared
// against their scalar twins here (they loop over every ISA level up to detected_isa_level(); the
// AMX cases of test_kernels_matmul run only where matmul_amx_available()). scripts/test.sh prints
// it after each kernel stage, so a CI log says what a green kernel run covered:
//   kernel paths: scalar avx2 avx512 | avx512 VNNI kernels: yes | AMX-INT8 tiles: no (AMX cases not run)
#include <cstdio>
#include <string>

#include "kernels/matmul.h"
#include "util/cpu_features.h"

int main() {
  using namespace tessera;
  std::string levels;
  for (int l = 0; l <= static_cast<int>(detected_isa_level()); ++l) {
    if (!levels.empty()) levels += ' ';
    levels += isa_name(static_cast<IsaLevel>(l));
  }
  const CpuFeatures& f = cpu_features();
  const bool amx = kernels::matmul_amx_available();
  std::printf("kernel paths: %s | avx512 VNNI kernels: %s | AMX-INT8 tiles: %s\n", levels.c_str(),
              detected_isa_level() >= IsaLevel::kAvx512 && f.avx512vnni ? "yes" : "no",
              amx ? "yes" : "no (AMX cases not run)");
  return 0;
}

// The one kind of GTEST_SKIP that CI accepts: the host's CPU lacks an instruction set the test
// needs (AVX2, AVX-512, AMX), or the build leaves it out (TESSERA_FORCE_SCALAR).
// tests/common/test_main.cpp lists these skips as "[ ISA SKIP ]" and, under TESSERA_NO_SKIP=1 (CI),
// fails the program on every other skip (a missing model, a missing file).
//   if (detected_isa_level() < IsaLevel::kAvx2) TESSERA_SKIP_ISA_ABSENT("AVX2");
#pragma once
#include <gtest/gtest.h>

namespace tessera::testing {
// The skip message's first words; test_main.cpp matches on them.
inline constexpr const char* kIsaAbsentSkip = "ISA unavailable (CPU or build): ";
}  // namespace tessera::testing

#define TESSERA_SKIP_ISA_ABSENT(isa) GTEST_SKIP() << ::tessera::testing::kIsaAbsentSkip << (isa)

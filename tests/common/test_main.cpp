// The main() of every gtest program (tessera_add_test links it instead of gtest_main). ctest counts
// a program whose tests all GTEST_SKIP as passed, so a missing model or data file would turn into
// a green run that tested nothing. This main lists every skip after the run, and under
// TESSERA_NO_SKIP=1 (set by CI: .ci/run, scripts/test.sh when CI=true) a skip fails the program,
// except the skips of isa_skip.h (the host lacks an instruction set), which are listed as
// "[ ISA SKIP ]" and pass.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "isa_skip.h"

namespace {

struct Skip {
  std::string test;     // "Suite.Name"
  std::string message;  // the GTEST_SKIP() stream
  bool isa_absent = false;
};

class SkipRecorder : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* result = info.result();
    if (!result->Skipped()) return;
    Skip s;
    s.test = std::string(info.test_suite_name()) + "." + info.name();
    for (int i = 0; i < result->total_part_count(); ++i) {
      const ::testing::TestPartResult& part = result->GetTestPartResult(i);
      if (part.skipped()) s.message = part.message();
    }
    const char* prefix = tessera::testing::kIsaAbsentSkip;
    s.isa_absent = s.message.compare(0, std::strlen(prefix), prefix) == 0;
    skips.push_back(std::move(s));
  }
  std::vector<Skip> skips;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto* recorder = new SkipRecorder;  // owned by gtest's listener list
  ::testing::UnitTest::GetInstance()->listeners().Append(recorder);
  const int status = RUN_ALL_TESTS();
  const char* no_skip_env = std::getenv("TESSERA_NO_SKIP");
  const bool no_skip = no_skip_env != nullptr && std::strcmp(no_skip_env, "1") == 0;
  int refused = 0;
  for (const Skip& s : recorder->skips) {
    const char* tag = s.isa_absent ? "[ ISA SKIP ]" : no_skip ? "[ NO_SKIP  ]" : "[ SKIPPED  ]";
    std::printf("%s %s: %s\n", tag, s.test.c_str(), s.message.c_str());
    if (!s.isa_absent && no_skip) ++refused;
  }
  if (refused > 0) {
    std::printf("[ NO_SKIP  ] %d skipped test(s) fail this program: TESSERA_NO_SKIP=1 (CI) runs every test "
                "that the host can run; install what the skip names (scripts/setup.sh)\n", refused);
    return 1;
  }
  return status;
}

#include <gtest/gtest.h>

#include "util/status.h"

namespace tessera {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return make_error(ErrorCode::kInvalidArgument, "expected a positive value, got {}", v);
  return v;
}

Status twice(int v) {
  TESSERA_TRY(parse_positive(v));
  return ok_status();
}

TEST(Result, ValueAndError) {
  EXPECT_EQ(parse_positive(3).value(), 3);
  Result<int> bad = parse_positive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message, "expected a positive value, got -1");
  EXPECT_EQ(bad.error().with_context("flag --n").message, "flag --n: expected a positive value, got -1");
  EXPECT_TRUE(twice(2).ok());
  EXPECT_FALSE(twice(0).ok());
}

// The public header alone (tessera/status.h, no util/) holds the type; reading it the wrong way
// still aborts with the message, as a failed TESSERA_CHECK does.
TEST(ResultDeathTest, WrongAccessAbortsWithTheMessage) {
  const Result<int> bad = Error{ErrorCode::kNotFound, "no such model"};
  EXPECT_DEATH((void)bad.value(), "check failed .*Result::value\\(\\) on error: no such model");
  const Status fine = ok_status();
  EXPECT_DEATH((void)fine.error(), "Result::error\\(\\) on a value");
}

}  // namespace
}  // namespace tessera

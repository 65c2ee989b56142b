// The GGUF reader against hostile input: an enumeration of hand-made corrupt files, each a valid
// writer output with bytes damaged (or assembled by hand), each expecting a clean Error with the
// right code and key words; then every truncation of small valid files. Run under ASan by
// scripts/test.sh, so a read out of bounds fails the test rather than passing silently.
#include <gtest/gtest.h>

#include <functional>

#include "make_test_gguf.h"

namespace tessera::gguf {
namespace {

using testing::ByteBuilder;
using testing::find_bytes;
using testing::kv_at;
using testing::parse_bytes;
using testing::pattern_bytes;
using testing::peek;
using testing::poke;
using testing::small_gguf;
using testing::tensor_info_at;

using Bytes = std::vector<uint8_t>;

struct CorruptCase {
  std::string name;
  std::function<Bytes()> make;
  ErrorCode code;
  std::vector<std::string> words;  // each must appear in the error message
};

// small_gguf() with one edit.
Bytes small_with(const std::function<void(Bytes&)>& edit) {
  Bytes b = small_gguf();
  edit(b);
  return b;
}

Bytes written(const std::function<void(GgufWriter&)>& build) {
  GgufWriter w;
  build(w);
  return w.to_bytes().value();
}

// A file whose only key is general.alignment, of the given type and raw value bytes.
Bytes alignment_file(uint32_t type, const std::function<void(ByteBuilder&)>& value) {
  ByteBuilder b;
  b.header(3, 0, 1).str("general.alignment").u32(type);
  value(b);
  return b.bytes;
}

Value nested_arrays(int depth) {
  Value v = make_int_value(ValueType::kInt32, 1);
  ValueType type = ValueType::kInt32;
  for (int i = 0; i < depth; ++i) {
    v = make_array_value(type, {v});
    type = ValueType::kArray;
  }
  return v;
}

constexpr uint64_t kHuge = uint64_t{1} << 63;

std::vector<CorruptCase> corrupt_cases() {
  const auto C = ErrorCode::kCorruptFile;
  const auto U = ErrorCode::kUnsupported;
  return {
      {"bad_magic", [] { return small_with([](Bytes& b) { b[3] = 'X'; }); }, C, {"bad magic", "47475558"}},
      {"bad_magic_short", [] { return Bytes{'G', 'X'}; }, C, {"bad magic"}},
      {"empty_file", [] { return Bytes{}; }, C, {"truncated", "0 bytes"}},
      {"version_1", [] { return small_with([](Bytes& b) { poke<uint32_t>(b, 4, 1); }); }, U, {"version 1"}},
      {"version_4", [] { return small_with([](Bytes& b) { poke<uint32_t>(b, 4, 4); }); }, U, {"version 4"}},
      {"version_big_endian_3",
       [] { return small_with([](Bytes& b) { poke<uint32_t>(b, 4, 0x03000000); }); }, U, {"version 50331648"}},
      {"tensor_count_absurd", [] { return small_with([](Bytes& b) { poke<uint64_t>(b, 8, kHuge); }); }, C,
       {"absurd tensor count 9223372036854775808"}},
      {"kv_count_absurd", [] { return small_with([](Bytes& b) { poke<uint64_t>(b, 16, kHuge); }); }, C,
       {"absurd metadata count"}},
      {"kv_count_too_many_for_the_file",
       [] {
         ByteBuilder b;  // says 2 entries, holds 1 (17 bytes; 2 need at least 26)
         return b.header(3, 0, 2).str("a").u32(4).u32(1).bytes;
       },
       C, {"truncated", "metadata count 2"}},
      {"key_length_absurd", [] { return small_with([](Bytes& b) { poke<uint64_t>(b, 24, kHuge); }); }, C,
       {"metadata entry 0", "absurd string length"}},
      {"key_length_past_the_end",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, 24, b.size()); }); }, C, {"metadata key", "truncated"}},
      {"string_value_length_absurd",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, kv_at(b, "test.str").value, kHuge); }); }, C,
       {"test.str", "absurd string length"}},
      {"string_value_length_2_pow_32",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, kv_at(b, "test.str").value, 1ull << 32); }); }, C,
       {"test.str", "absurd string length 4294967296"}},
      {"array_length_absurd",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, kv_at(b, "test.arr").value + 4, kHuge); }); }, C,
       {"test.arr", "absurd array length (of int32) 9223372036854775808"}},
      {"array_length_past_the_end",
       [] {
         ByteBuilder b;  // says 10 int32s, holds 2
         return b.header(3, 0, 1).str("arr").u32(9).u32(5).u64(10).u32(1).u32(2).bytes;
       },
       C, {"'arr'", "truncated", "array length (of int32) 10"}},
      {"array_element_type_invalid",
       [] { return small_with([](Bytes& b) { poke<uint32_t>(b, kv_at(b, "test.arr").value, 13); }); }, C,
       {"test.arr", "invalid array element type 13"}},
      {"value_type_invalid",
       [] { return small_with([](Bytes& b) { poke<uint32_t>(b, kv_at(b, "test.u32").type, 13); }); }, C,
       {"test.u32", "invalid value type 13"}},
      {"value_type_ffffffff",
       [] { return small_with([](Bytes& b) { poke<uint32_t>(b, kv_at(b, "test.u32").type, 0xffffffffu); }); }, C,
       {"invalid value type 4294967295"}},
      {"bool_value_2",
       [] {
         Bytes b = written([](GgufWriter& w) { w.set_bool("flag", true); });
         poke<uint8_t>(b, kv_at(b, "flag").value, 2);
         return b;
       },
       C, {"flag", "bool value 2"}},
      {"bool_array_item_255",
       [] {
         const bool flags[] = {false, true};
         Bytes b = written([&](GgufWriter& w) { w.set_bool_array("flags", flags); });
         poke<uint8_t>(b, kv_at(b, "flags").value + 4 + 8 + 1, 255);
         return b;
       },
       C, {"flags", "bool value 255"}},
      {"arrays_nested_5_deep",
       [] { return written([](GgufWriter& w) { w.set_value("deep", nested_arrays(5)); }); }, C,
       {"deep", "nested deeper than 4"}},
      {"duplicate_key",
       [] {
         Bytes b = written([](GgufWriter& w) {
           w.set_uint32("k.a", 1);
           w.set_uint32("k.b", 2);
         });
         b[find_bytes(b, "k.b") + 2] = 'a';
         return b;
       },
       C, {"duplicate metadata key 'k.a'"}},
      {"alignment_not_power_of_two",
       [] {
         Bytes b = written([](GgufWriter& w) { w.set_alignment(64); });
         poke<uint32_t>(b, kv_at(b, "general.alignment").value, 48);
         return b;
       },
       C, {"alignment", "48"}},
      {"alignment_zero", [] { return alignment_file(4, [](ByteBuilder& b) { b.u32(0); }); }, C, {"alignment", "0"}},
      {"alignment_2_pow_31",
       [] { return alignment_file(4, [](ByteBuilder& b) { b.u32(1u << 31); }); }, C, {"alignment"}},
      {"alignment_int32",
       [] {
         Bytes b = written([](GgufWriter& w) { w.set_alignment(64); });
         poke<uint32_t>(b, kv_at(b, "general.alignment").type, 5);  // int32: same width
         return b;
       },
       C, {"alignment", "int32"}},
      {"alignment_uint64", [] { return alignment_file(10, [](ByteBuilder& b) { b.u64(32); }); }, C,
       {"alignment", "uint64"}},
      {"alignment_string", [] { return alignment_file(8, [](ByteBuilder& b) { b.str("32"); }); }, C,
       {"alignment", "string"}},
      {"tensor_name_length_absurd",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, find_bytes(b, "tok") - 8, kHuge); }); }, C,
       {"tensor 0", "absurd string length"}},
      {"n_dims_0", [] { return small_with([](Bytes& b) { poke<uint32_t>(b, tensor_info_at(b, "tok").n_dims, 0); }); },
       C, {"'tok'", "0 dimensions"}},
      {"n_dims_5", [] { return small_with([](Bytes& b) { poke<uint32_t>(b, tensor_info_at(b, "tok").n_dims, 5); }); },
       C, {"'tok'", "5 dimensions"}},
      {"dim_zero",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, tensor_info_at(b, "tok").dims + 8, 0); }); }, C,
       {"'tok'", "absurd dimension 1 = 0"}},
      {"dim_2_pow_63",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, tensor_info_at(b, "tok").dims, kHuge); }); }, C,
       {"'tok'", "absurd dimension 0 = 9223372036854775808"}},
      {"dims_product_overflows",
       [] {
         return small_with([](Bytes& b) {
           const size_t dims = tensor_info_at(b, "tok").dims;
           poke<uint64_t>(b, dims, uint64_t{1} << 40);
           poke<uint64_t>(b, dims + 8, uint64_t{1} << 40);
         });
       },
       C, {"'tok'", "absurd dimension 1"}},
      {"tensor_type_unknown_4",
       [] { return small_with([](Bytes& b) { poke<uint32_t>(b, tensor_info_at(b, "tok").type, 4); }); }, U,
       {"'tok'", "unknown tensor type 4"}},
      {"tensor_type_unknown_1000",
       [] { return small_with([](Bytes& b) { poke<uint32_t>(b, tensor_info_at(b, "tok").type, 1000); }); }, U,
       {"unknown tensor type 1000"}},
      {"row_not_a_multiple_of_the_block",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, tensor_info_at(b, "q8").dims, 16); }); }, C,
       {"'q8'", "row length 16", "not a multiple", "32"}},
      {"tensor_offset_misaligned",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, tensor_info_at(b, "q8").offset, 33); }); }, C,
       {"'q8'", "offset 33", "not aligned to 32"}},
      {"tensor_offset_misaligned_for_64",
       [] {
         Bytes b = written([](GgufWriter& w) {
           w.set_alignment(64);
           (void)w.add_tensor("a", {4}, DType::F32, pattern_bytes(16, 0));
           (void)w.add_tensor("b", {4}, DType::F32, pattern_bytes(16, 0));
         });
         poke<uint64_t>(b, tensor_info_at(b, "b").offset, 32);
         return b;
       },
       C, {"'b'", "not aligned to 64"}},
      {"tensor_offset_past_the_end",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, tensor_info_at(b, "q8").offset, 1u << 20); }); }, C,
       {"'q8'", "past the end"}},
      {"tensor_offset_near_2_pow_64",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, tensor_info_at(b, "q8").offset, ~uint64_t{31}); }); },
       C, {"'q8'", "past the end"}},
      {"tensor_size_past_the_end",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, tensor_info_at(b, "tok").dims + 8, 1000); }); }, C,
       {"'tok'", "past the end"}},
      {"tensor_data_cut_short",
       [] { return small_with([](Bytes& b) { b.resize(b.size() - 40); }); }, C, {"'q8'", "past the end"}},
      {"tensors_overlap_same_offset",
       [] { return small_with([](Bytes& b) { poke<uint64_t>(b, tensor_info_at(b, "q8").offset, 0); }); }, C,
       {"overlap"}},
      {"tensors_overlap_partly",
       [] {
         Bytes b = written([](GgufWriter& w) {
           (void)w.add_tensor("a", {10}, DType::F32, pattern_bytes(40, 0));  // [0, 40)
           (void)w.add_tensor("b", {4}, DType::F32, pattern_bytes(16, 0));   // [64, 80)
         });
         poke<uint64_t>(b, tensor_info_at(b, "b").offset, 32);  // [32, 48) overlaps a
         return b;
       },
       C, {"tensors 'a' and 'b' overlap"}},
      {"duplicate_tensor_name",
       [] {
         Bytes b = written([](GgufWriter& w) {
           (void)w.add_tensor("t.a", {4}, DType::F32, pattern_bytes(16, 0));
           (void)w.add_tensor("t.b", {4}, DType::F32, pattern_bytes(16, 0));
         });
         b[find_bytes(b, "t.b") + 2] = 'a';
         return b;
       },
       C, {"duplicate tensor name 't.a'"}},
      {"data_section_past_the_end",
       [] {
         ByteBuilder b;  // one tensor, and the file ends right after its info: no data at all
         b.header(3, 1, 0).str("t").u32(1).u64(4).u32(0).u64(0);
         return b.bytes;
       },
       C, {"truncated", "data section"}},
  };
}

class GgufCorrupt : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(GgufCorrupt, FailsCleanlyWithTheRightError) {
  const CorruptCase& c = GetParam();
  const Bytes bytes = c.make();
  auto r = parse_bytes(bytes);
  ASSERT_FALSE(r.ok()) << c.name << " parsed";
  EXPECT_EQ(error_code_name(r.error().code), std::string(error_code_name(c.code))) << r.error().message;
  for (const std::string& word : c.words) {
    EXPECT_NE(r.error().message.find(word), std::string::npos)
        << "'" << word << "' not in: " << r.error().message;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GgufCorrupt, ::testing::ValuesIn(corrupt_cases()),
                         [](const auto& info) { return info.param.name; });

// The undamaged files the cases start from parse, so each case fails for its damage alone.
TEST(GgufCorruptBase, StartingPointsAreValid) {
  const Bytes small = small_gguf();
  EXPECT_TRUE(parse_bytes(small).ok());
  const Bytes deep4 = written([](GgufWriter& w) { w.set_value("deep", nested_arrays(4)); });
  EXPECT_TRUE(parse_bytes(deep4).ok());  // 4 levels is the limit, inclusive
  const Bytes aligned = alignment_file(4, [](ByteBuilder& b) { b.u32(1u << 20); });
  auto g = parse_bytes(aligned);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->alignment(), 1u << 20);
}

// Every prefix of a valid file fails cleanly (kCorruptFile, with a message that says why) until it
// holds the whole header and every tensor's data; from there on only padding is cut and it parses.
void expect_every_prefix_fails_cleanly(const Bytes& full) {
  auto whole = parse_bytes(full);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  size_t first_ok = full.size();  // the shortest prefix that parses
  for (size_t n = full.size(); n-- > 0;) {
    const Bytes prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    if (!parse_bytes(prefix).ok()) break;
    first_ok = n;
  }
  if (whole->tensors().empty()) {
    // The header ends within the last alignment slot before the (empty) data section.
    EXPECT_GT(first_ok + whole->alignment(), whole->data_offset());
    EXPECT_LE(first_ok, whole->data_offset());
  } else {
    size_t needed = 0;
    for (const TensorInfo& t : whole->tensors()) {
      needed = std::max<size_t>(needed, whole->data_offset() + t.offset + t.num_bytes);
    }
    EXPECT_EQ(first_ok, needed);
  }
  for (size_t n = 0; n < full.size(); ++n) {
    const Bytes prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = parse_bytes(prefix);
    if (n >= first_ok) {
      EXPECT_TRUE(r.ok()) << "prefix " << n << ": " << r.error().message;
      continue;
    }
    ASSERT_FALSE(r.ok()) << "prefix " << n << " of " << full.size() << " parsed";
    EXPECT_EQ(r.error().code, ErrorCode::kCorruptFile) << n << ": " << r.error().message;
    const std::string& m = r.error().message;
    EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("absurd") != std::string::npos ||
                m.find("past the end") != std::string::npos)
        << "prefix " << n << ": " << m;
  }
}

TEST(GgufTruncated, EveryPrefixOfTheSmallFile) {
  const Bytes full = small_gguf();
  ASSERT_EQ(full.size(), 384u);
  expect_every_prefix_fails_cleanly(full);
}

TEST(GgufTruncated, EveryPrefixOfEachFuzzSeed) {
  for (const auto& [name, bytes] : testing::fuzz_seed_files()) {
    SCOPED_TRACE(name);
    expect_every_prefix_fails_cleanly(bytes);
  }
}

}  // namespace
}  // namespace tessera::gguf

// GgufWriter: exact bytes against hand assembly, round trips of every value type and of tensors of
// several types through the reader, validation of bad input, and the committed fuzz seeds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>

#include "make_test_gguf.h"

namespace tessera::gguf {
namespace {

using testing::ByteBuilder;
using testing::parse_bytes;
using testing::pattern_bytes;

const Value& value_at(const GgufFile& g, size_t i, std::string_view key) {
  EXPECT_EQ(g.metadata().at(i).first, key);
  return g.metadata().at(i).second;
}

TEST(GgufWriter, EmptyFileIsTheBareHeader) {
  const auto bytes = GgufWriter().to_bytes().value();
  ByteBuilder expected;
  expected.header(3, 0, 0).pad_to(32);
  EXPECT_EQ(bytes, expected.bytes);
  auto g = parse_bytes(bytes);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->metadata().size(), 0u);
  EXPECT_EQ(g->tensors().size(), 0u);
  EXPECT_EQ(g->data_offset(), 32u);
}

// The writer's output, byte for byte, against the same file assembled by hand from the spec.
TEST(GgufWriter, BytesMatchHandAssembly) {
  GgufWriter w;
  w.set_uint32("a", 0x01020304u);
  w.set_string("s", "xy");
  const std::vector<int32_t> ints = {-1, 2};
  w.set_int32_array("arr", ints);
  ASSERT_TRUE(w.add_tensor("t0", {3}, DType::F32, pattern_bytes(12, 9)).ok());
  ASSERT_TRUE(w.add_tensor("t1", {2, 2}, DType::F16, pattern_bytes(8, 10)).ok());

  ByteBuilder b;
  b.header(3, 2, 3);
  b.str("a").u32(4).u32(0x01020304u);
  b.str("s").u32(8).str("xy");
  b.str("arr").u32(9).u32(5).u64(2).u32(static_cast<uint32_t>(-1)).u32(2);
  b.str("t0").u32(1).u64(3).u32(0).u64(0);
  b.str("t1").u32(2).u64(2).u64(2).u32(1).u64(32);  // t0 is 12 bytes, padded to 32
  b.pad_to(32);
  const auto t0 = pattern_bytes(12, 9), t1 = pattern_bytes(8, 10);
  b.bytes.insert(b.bytes.end(), t0.begin(), t0.end());
  b.pad_to(32);
  b.bytes.insert(b.bytes.end(), t1.begin(), t1.end());
  b.pad_to(32);

  const auto bytes = w.to_bytes().value();
  EXPECT_EQ(bytes.size(), 256u);  // 175-byte header padded to 192, two 32-byte data slots
  EXPECT_EQ(bytes, b.bytes);
}

TEST(GgufWriter, RoundTripsEveryScalarType) {
  GgufWriter w;
  w.set_uint8("u8", 255);
  w.set_int8("i8", -128);
  w.set_uint16("u16", 65535);
  w.set_int16("i16", -32768);
  w.set_uint32("u32", 4294967295u);
  w.set_int32("i32", std::numeric_limits<int32_t>::min());
  w.set_uint64("u64", std::numeric_limits<uint64_t>::max());
  w.set_int64("i64", std::numeric_limits<int64_t>::min());
  w.set_float32("f32", -0.1f);
  w.set_float64("f64", 1e300);
  w.set_bool("b0", false);
  w.set_bool("b1", true);
  w.set_string("empty", "");
  w.set_string("utf8", "\xe2\x96\x81h\xc3\xa9llo\n\t");
  const auto bytes = w.to_bytes().value();
  auto r = parse_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = *r;
  ASSERT_EQ(g.metadata().size(), 14u);

  struct Expect {
    std::string_view key;
    ValueType type;
  };
  const Expect expected[] = {
      {"u8", ValueType::kUint8},     {"i8", ValueType::kInt8},       {"u16", ValueType::kUint16},
      {"i16", ValueType::kInt16},    {"u32", ValueType::kUint32},    {"i32", ValueType::kInt32},
      {"u64", ValueType::kUint64},   {"i64", ValueType::kInt64},     {"f32", ValueType::kFloat32},
      {"f64", ValueType::kFloat64},  {"b0", ValueType::kBool},       {"b1", ValueType::kBool},
      {"empty", ValueType::kString}, {"utf8", ValueType::kString},
  };
  for (size_t i = 0; i < std::size(expected); ++i) {
    EXPECT_EQ(value_at(g, i, expected[i].key).type, expected[i].type) << expected[i].key;
  }
  EXPECT_EQ(g.get_uint("u8").value(), 255u);
  EXPECT_EQ(g.get_int("i8").value(), -128);
  EXPECT_EQ(g.get_uint("u16").value(), 65535u);
  EXPECT_EQ(g.get_int("i16").value(), -32768);
  EXPECT_EQ(g.get_uint("u32").value(), 4294967295u);
  EXPECT_EQ(g.get_int("i32").value(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(g.get_uint("u64").value(), std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(g.get_int("u64").ok());  // does not fit an int64
  EXPECT_EQ(g.get_int("i64").value(), std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(g.get_uint("i64").ok());  // negative
  EXPECT_EQ(g.get_float("f32").value(), static_cast<double>(-0.1f));
  EXPECT_EQ(g.get_float("f64").value(), 1e300);
  EXPECT_EQ(g.get_bool("b0").value(), false);
  EXPECT_EQ(g.get_bool("b1").value(), true);
  EXPECT_EQ(g.get_string("empty").value(), "");
  EXPECT_EQ(g.get_string("utf8").value(), "\xe2\x96\x81h\xc3\xa9llo\n\t");
  EXPECT_EQ(g.get_float("u8").value(), 255.0);  // integers read as numbers
  auto mistyped = g.get_string("u32");
  ASSERT_FALSE(mistyped.ok());
  EXPECT_EQ(mistyped.error().code, ErrorCode::kCorruptFile);
  EXPECT_NE(mistyped.error().message.find("'u32'"), std::string::npos);
  EXPECT_EQ(g.get_uint("nope").error().code, ErrorCode::kNotFound);
}

TEST(GgufWriter, RoundTripsArraysIncludingNestedAndEmpty) {
  GgufWriter w;
  const std::vector<std::string> strings = {"", "a", "", "\xf0\x9f\x99\x82"};
  w.set_string_array("strs", strings);
  const std::vector<float> floats = {1.5f, -0.0f, 3e38f};
  w.set_float_array("floats", floats);
  const std::vector<int32_t> i32 = {std::numeric_limits<int32_t>::min(), 0, 7};
  w.set_int32_array("i32", i32);
  const std::vector<uint32_t> u32 = {4294967295u};
  w.set_uint32_array("u32", u32);
  const std::vector<int64_t> i64 = {-5, std::numeric_limits<int64_t>::max()};
  w.set_int64_array("i64", i64);
  const std::vector<uint8_t> u8 = {0, 255};
  w.set_uint8_array("u8", u8);
  const bool bools[] = {true, false, true};
  w.set_bool_array("bools", bools);
  w.set_string_array("empty_strs", {});
  w.set_float_array("empty_floats", {});
  w.set_value("empty_arrays", make_array_value(ValueType::kArray, {}));
  // [[1, 2], [], [[["deep"]]]] is ragged: each inner array carries its own element type.
  w.set_value("nested",
              make_array_value(ValueType::kArray,
                               {make_array_value(ValueType::kInt16, {make_int_value(ValueType::kInt16, 1),
                                                                     make_int_value(ValueType::kInt16, 2)}),
                                make_array_value(ValueType::kFloat64, {}),
                                make_array_value(ValueType::kArray,
                                                 {make_array_value(ValueType::kString,
                                                                   {make_string_value("deep")})})}));
  const auto bytes = w.to_bytes().value();
  auto r = parse_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = *r;
  ASSERT_EQ(g.metadata().size(), 11u);

  EXPECT_EQ(g.get_string_array("strs").value(), strings);
  EXPECT_EQ(g.get_float_array("floats").value(), floats);
  EXPECT_TRUE(std::signbit(g.get_float_array("floats").value()[1]));
  EXPECT_EQ(g.get_int_array("i32").value(), (std::vector<int64_t>{std::numeric_limits<int32_t>::min(), 0, 7}));
  EXPECT_EQ(g.get_int_array("u32").value(), (std::vector<int64_t>{4294967295}));
  EXPECT_EQ(g.get_int_array("i64").value(), i64);
  EXPECT_EQ(g.get_int_array("u8").value(), (std::vector<int64_t>{0, 255}));
  EXPECT_TRUE(g.get_string_array("empty_strs").value().empty());
  EXPECT_TRUE(g.get_float_array("empty_floats").value().empty());
  EXPECT_FALSE(g.get_string_array("i32").ok());
  EXPECT_FALSE(g.get_int_array("floats").ok());

  const auto& bools_v = std::get<ArrayValue>(g.find("bools")->data);
  EXPECT_EQ(bools_v.element_type, ValueType::kBool);
  ASSERT_EQ(bools_v.items.size(), 3u);
  EXPECT_EQ(std::get<bool>(bools_v.items[0].data), true);
  EXPECT_EQ(std::get<bool>(bools_v.items[1].data), false);

  const auto& empty_arrays = std::get<ArrayValue>(g.find("empty_arrays")->data);
  EXPECT_EQ(empty_arrays.element_type, ValueType::kArray);
  EXPECT_TRUE(empty_arrays.items.empty());

  const auto& nested = std::get<ArrayValue>(g.find("nested")->data);
  ASSERT_EQ(nested.element_type, ValueType::kArray);
  ASSERT_EQ(nested.items.size(), 3u);
  const auto& first = std::get<ArrayValue>(nested.items[0].data);
  EXPECT_EQ(first.element_type, ValueType::kInt16);
  ASSERT_EQ(first.items.size(), 2u);
  EXPECT_EQ(first.items[0].type, ValueType::kInt16);
  EXPECT_EQ(std::get<int64_t>(first.items[1].data), 2);
  const auto& second = std::get<ArrayValue>(nested.items[1].data);
  EXPECT_EQ(second.element_type, ValueType::kFloat64);
  EXPECT_TRUE(second.items.empty());
  const auto& third = std::get<ArrayValue>(nested.items[2].data);
  const auto& deepest = std::get<ArrayValue>(third.items.at(0).data);
  EXPECT_EQ(std::get<std::string>(deepest.items.at(0).data), "deep");
}

TEST(GgufWriter, SettingAKeyAgainReplacesItInPlace) {
  GgufWriter w;
  w.set_uint32("a", 1);
  w.set_uint32("b", 2);
  w.set_string("a", "now a string");
  EXPECT_EQ(w.num_metadata(), 2u);
  const auto bytes = w.to_bytes().value();
  auto g = parse_bytes(bytes);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->metadata()[0].first, "a");
  EXPECT_EQ(g->get_string("a").value(), "now a string");
  EXPECT_EQ(g->metadata()[1].first, "b");
}

struct TensorCase {
  const char* name;
  std::vector<int64_t> dims;
  DType type;
  size_t num_bytes;
};

void expect_tensors_round_trip(uint32_t alignment, uint32_t version) {
  const std::vector<TensorCase> cases = {
      {"f32", {5, 3}, DType::F32, 60},        {"f16", {7}, DType::F16, 14},
      {"bf16", {2, 2, 2}, DType::BF16, 16},   {"q8_0", {64, 3}, DType::Q8_0, 6 * 34},
      {"q4_0", {32}, DType::Q4_0, 18},        {"q4_1", {32, 2}, DType::Q4_1, 40},
      {"q4_k", {256, 2}, DType::Q4_K, 288},   {"q6_k", {256}, DType::Q6_K, 210},
      {"i32", {1, 1, 1, 3}, DType::I32, 12},
  };
  GgufWriter w(version);
  if (alignment != kDefaultAlignment) w.set_alignment(alignment);
  w.set_string("general.name", "tensors");
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(w.add_tensor(cases[i].name, cases[i].dims, cases[i].type,
                             pattern_bytes(cases[i].num_bytes, static_cast<uint8_t>(i)))
                    .ok());
  }
  const auto bytes = w.to_bytes().value();
  EXPECT_EQ(bytes.size() % alignment, 0u);
  auto r = parse_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = *r;
  EXPECT_EQ(g.version(), version);
  EXPECT_EQ(g.alignment(), alignment);
  EXPECT_EQ(g.data_offset() % alignment, 0u);
  ASSERT_EQ(g.tensors().size(), cases.size());
  uint64_t expected_offset = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorInfo& t = g.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(t.dims, cases[i].dims);
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.num_bytes, cases[i].num_bytes);
    EXPECT_EQ(t.offset, expected_offset);
    EXPECT_EQ(t.data, bytes.data() + g.data_offset() + t.offset);
    const auto want = pattern_bytes(cases[i].num_bytes, static_cast<uint8_t>(i));
    EXPECT_TRUE(std::equal(want.begin(), want.end(), t.data));
    EXPECT_EQ(g.find_tensor(cases[i].name), &t);
    expected_offset += (cases[i].num_bytes + alignment - 1) / alignment * alignment;
  }
  EXPECT_EQ(g.data_offset() + expected_offset, bytes.size());
}

TEST(GgufWriter, RoundTripsTensorsOfSeveralTypes) { expect_tensors_round_trip(32, 3); }
TEST(GgufWriter, RoundTripsTensorsWithAlignment1And256) {
  expect_tensors_round_trip(1, 3);
  expect_tensors_round_trip(256, 3);
}

// Versions 2 and 3 share the layout: the same writer input reads back the same, bar the version.
TEST(GgufWriter, Version2ReadsTheSameAsVersion3) {
  expect_tensors_round_trip(32, 2);
  GgufWriter w2(2), w3(3);
  for (GgufWriter* w : {&w2, &w3}) {
    w->set_uint64("n", 1ull << 40);
    const std::vector<std::string> s = {"x", "yz"};
    w->set_string_array("s", s);
    ASSERT_TRUE(w->add_tensor_f32("t", {2}, std::vector<float>{1.0f, 2.0f}).ok());
  }
  auto b2 = w2.to_bytes().value(), b3 = w3.to_bytes().value();
  ASSERT_EQ(b2.size(), b3.size());
  EXPECT_EQ(testing::peek<uint32_t>(b2, 4), 2u);
  EXPECT_TRUE(std::equal(b2.begin() + 8, b2.end(), b3.begin() + 8));
  auto g2 = parse_bytes(b2), g3 = parse_bytes(b3);
  ASSERT_TRUE(g2.ok() && g3.ok());
  EXPECT_EQ(g2->version(), 2u);
  EXPECT_EQ(g2->get_uint("n").value(), 1ull << 40);
  EXPECT_EQ(g2->get_string_array("s").value(), g3->get_string_array("s").value());
  EXPECT_EQ(g2->find_tensor("t")->offset, g3->find_tensor("t")->offset);
  EXPECT_EQ(g2->data_offset(), g3->data_offset());
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor("ok", {32}, DType::Q8_0, pattern_bytes(34, 0)).ok());
  struct Bad {
    const char* name;
    std::vector<int64_t> dims;
    DType type;
    size_t num_bytes;
    const char* words;
  };
  const Bad bad[] = {
      {"ok", {32}, DType::Q8_0, 34, "duplicate tensor name"},
      {"", {4}, DType::F32, 16, "name is empty"},
      {"size", {4}, DType::F32, 15, "15 bytes given"},
      {"nodims", {}, DType::F32, 0, "0 dimensions"},
      {"fivedims", {1, 1, 1, 1, 1}, DType::F32, 4, "5 dimensions"},
      {"zero", {4, 0}, DType::F32, 0, "bad dimension 0"},
      {"negative", {-4}, DType::F32, 0, "bad dimension -4"},
      {"overflow", {1ll << 40, 1ll << 40}, DType::F32, 0, "bad dimension"},
      {"row", {33}, DType::Q8_0, 34, "not a multiple"},
      {"unknown", {4}, static_cast<DType>(4), 16, "unknown type 4"},
  };
  for (const Bad& b : bad) {
    Status s = w.add_tensor(b.name, b.dims, b.type, pattern_bytes(b.num_bytes, 0));
    ASSERT_FALSE(s.ok()) << b.name;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument) << b.name;
    EXPECT_NE(s.error().message.find(b.words), std::string::npos) << s.error().message;
  }
  EXPECT_EQ(w.num_tensors(), 1u);
}

TEST(GgufWriter, RejectsInconsistentValues) {
  auto error_of = [](GgufWriter& w) {
    auto r = w.to_bytes();
    EXPECT_FALSE(r.ok());
    return r.ok() ? Error{} : r.error();
  };
  {
    GgufWriter w;
    w.set_value("k", make_uint_value(ValueType::kUint8, 256));
    const Error e = error_of(w);
    EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.message, "metadata key 'k': 256 does not fit in uint8");
  }
  {
    GgufWriter w;
    w.set_value("k", make_int_value(ValueType::kInt16, -40000));
    EXPECT_EQ(error_of(w).message, "metadata key 'k': -40000 does not fit in int16");
  }
  {
    GgufWriter w;
    w.set_value("k", Value{ValueType::kString, uint64_t{3}});
    EXPECT_EQ(error_of(w).message, "metadata key 'k': string value does not hold a string");
  }
  {
    GgufWriter w;
    w.set_value("k", make_array_value(ValueType::kInt32, {make_int_value(ValueType::kInt32, 1),
                                                          make_string_value("x")}));
    EXPECT_EQ(error_of(w).message, "metadata key 'k': array item 1 is string in an array of int32");
  }
  {
    GgufWriter w;
    w.set_uint64("general.alignment", 64);
    EXPECT_EQ(error_of(w).message, "general.alignment must be a uint32 power of two, got a uint64");
  }
  {
    GgufWriter w;
    w.set_uint32("general.alignment", 48);
    EXPECT_EQ(error_of(w).code, ErrorCode::kInvalidArgument);
  }
}

TEST(GgufWriter, ReferencedTensorsSurviveCopiesOfTheWriter) {
  const auto data = pattern_bytes(16, 42);
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor_ref("ref", {4}, DType::F32, data).ok());
  ASSERT_TRUE(w.add_tensor("copy", {4}, DType::F32, pattern_bytes(16, 43)).ok());
  const GgufWriter copy = w;  // the copy's owned bytes are its own
  w = GgufWriter();
  const auto bytes = copy.to_bytes().value();
  auto g = parse_bytes(bytes);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), g->find_tensor("ref")->data));
  const auto want = pattern_bytes(16, 43);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), g->find_tensor("copy")->data));
}

TEST(GgufWriter, WritesToDiskAndOpens) {
  const std::string path = ::testing::TempDir() + "tessera_gguf_writer_test.gguf";
  const GgufWriter w = testing::small_writer();
  ASSERT_TRUE(w.write(path).ok());
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.error().message;
  const auto bytes = w.to_bytes().value();
  EXPECT_EQ(g->file_size(), bytes.size());
  EXPECT_EQ(g->get_string("general.architecture").value(), "llama");
  const TensorInfo* q8 = g->find_tensor("q8");
  ASSERT_NE(q8, nullptr);
  EXPECT_TRUE(std::equal(q8->data, q8->data + q8->num_bytes, bytes.data() + g->data_offset() + q8->offset));
  std::remove(path.c_str());

  Status bad = w.write("/nonexistent-dir/x.gguf");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kIo);
}

// The committed seeds in fuzz/corpus/ are exactly what the writer makes today. Regenerate them
// with TESSERA_REGEN_FUZZ_CORPUS=1 after a deliberate format change.
TEST(GgufWriter, FuzzSeedsAreCurrent) {
  const bool regen = std::getenv("TESSERA_REGEN_FUZZ_CORPUS") != nullptr;
  for (const auto& [name, bytes] : testing::fuzz_seed_files()) {
    SCOPED_TRACE(name);
    EXPECT_LT(bytes.size(), 4096u);
    auto g = parse_bytes(bytes);
    ASSERT_TRUE(g.ok()) << g.error().message;
    const std::string path = std::string(TESSERA_FUZZ_CORPUS_DIR) + "/" + name;
    if (regen) {
      std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                  static_cast<std::streamsize>(bytes.size()));
    }
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in.good()) << "missing " << path;
    const std::vector<uint8_t> committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(committed, bytes);
  }
}

}  // namespace
}  // namespace tessera::gguf

// Shared helpers of the tokenizer tests: loading vocab-only GGUFs and the .inp/.out vectors.
#pragma once
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tessera::tokenizer::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string tokenizer_data(const std::string& name) {
  return std::string(TESSERA_TESTDATA_DIR) + "/tokenizer/" + name;
}

inline Tokenizer load_tokenizer(const std::string& path) {
  Result<gguf::GgufFile> file = gguf::GgufFile::open(path);
  TESSERA_CHECK(file.ok(), "open {}: {}", path, file.ok() ? "" : file.error().message);
  Result<Tokenizer> t = Tokenizer::from_gguf(*file);
  TESSERA_CHECK(t.ok(), "tokenizer {}: {}", path, t.ok() ? "" : t.error().message);
  return std::move(t).value();
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// X.inp: strings each followed by "\n__ggml_vocab_test__\n"; X.out: one line of ids per string.
inline std::vector<VocabCase> load_cases(const std::string& gguf_path) {
  const std::string inp = read_file(gguf_path + ".inp");
  const std::string out = read_file(gguf_path + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  for (size_t pos = 0; pos < inp.size();) {
    size_t end = inp.find(sep, pos);
    if (end == std::string::npos) end = inp.size();
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (VocabCase& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) c.ids.push_back(id);
  }
  return cases;
}

inline std::string ids_str(const std::vector<int32_t>& ids) {
  return fmt::format("[{}]", fmt::join(ids, ", "));
}

}  // namespace tessera::tokenizer::testing

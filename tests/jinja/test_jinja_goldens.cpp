// Real chat templates (tests/data/jinja/templates, sources in sources.json) rendered by tessera's
// Jinja engine must equal Python jinja2's rendering byte for byte (goldens.json, written by
// scripts/gen_jinja_goldens.py with Hugging Face's settings); where jinja2 raised, tessera must
// return an error too.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "jinja/template.h"

namespace tessera::jinja {
namespace {

const std::string kDir = std::string(TESSERA_PROJECT_TESTDATA_DIR) + "/jinja/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 2024-07-26 12:00 local time, as the generator's strftime_now.
std::time_t golden_now() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

TEST(JinjaGoldens, RealTemplatesMatchJinja2ByteForByte) {
  const auto goldens = nlohmann::ordered_json::parse(read_file(kDir + "goldens.json"));
  const auto sources = nlohmann::ordered_json::parse(read_file(kDir + "sources.json"));
  std::map<std::string, Template> templates;
  for (const auto& [name, _] : sources.items()) {
    auto t = Template::parse(read_file(kDir + "templates/" + name + ".jinja"));
    ASSERT_TRUE(t.ok()) << name << ": " << t.error().message;
    templates.emplace(name, std::move(t).value());
  }
  EXPECT_GE(templates.size(), 12u);
  RenderOptions options;
  options.now = golden_now();
  int compared = 0, errors = 0;
  std::map<std::string, int> rendered;  // per template: renders compared
  for (const auto& c : goldens["cases"]) {
    const std::string name = c["template"], conversation = c["conversation"];
    SCOPED_TRACE(name + " / " + conversation);
    const Value context = from_json(c["context"]);
    auto out = templates.at(name).render(context.as_dict(), options);
    if (c.contains("error")) {
      EXPECT_FALSE(out.ok()) << "jinja2 raised " << c["error"].get<std::string>() << " but tessera rendered:\n" << *out;
      ++errors;
      continue;
    }
    if (!out.ok()) {
      ADD_FAILURE() << out.error().message;
      continue;
    }
    const std::string expected = c["output"];
    if (*out != expected) {
      size_t at = 0;
      while (at < out->size() && at < expected.size() && (*out)[at] == expected[at]) ++at;
      ADD_FAILURE() << "differs at byte " << at << "\n--- jinja2:\n" << expected.substr(at > 80 ? at - 80 : 0, 240)
                    << "\n--- tessera:\n" << out->substr(at > 80 ? at - 80 : 0, 240);
    }
    ++compared;
    ++rendered[name];
  }
  // 33 templates x 11 conversations (scripts/gen_jinja_goldens.py): every template renders some of
  // them, so none is in the suite only as an expected error.
  EXPECT_EQ(compared, 335);
  EXPECT_EQ(errors, 28);
  for (const auto& [name, _] : templates) EXPECT_GT(rendered[name], 0) << name << " renders no conversation";
  std::printf("%zu templates, %d renders compared, %d expected errors\n", templates.size(), compared, errors);
}

}  // namespace
}  // namespace tessera::jinja

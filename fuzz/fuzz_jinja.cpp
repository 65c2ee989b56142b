// libFuzzer over chat-template source: parse, then render with a fixed chat context (messages with
// a tool call and a tool result, tools, add_generation_prompt). Any input must end in a value or a
// clean Error: no crash, no sanitizer report, and never past the caps (small limits here, so a
// loop or recursion bomb is cut short quickly; a render that returns is within them by
// construction, and the output size is checked).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "jinja/template.h"
#include "util/check.h"

namespace {

const tessera::jinja::ValueDict& context() {
  static const tessera::jinja::ValueDict ctx = tessera::jinja::from_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "sys"},
      {"role": "user", "content": "What's the weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "22 C"}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"
  })")).as_dict();
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::jinja::Limits limits;
  limits.max_steps = 20000;
  limits.max_output_bytes = 1 << 16;
  limits.max_work_bytes = 1 << 22;
  limits.max_call_depth = 16;
  limits.max_nesting = 64;
  auto t = tessera::jinja::Template::parse(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!t.ok()) return 0;
  tessera::jinja::RenderOptions options;
  options.now = 1721995200;  // fixed: strftime_now is deterministic here
  auto out = t->render(context(), options);
  if (out.ok()) TESSERA_CHECK(out->size() <= limits.max_output_bytes, "output past its cap");
  return 0;
}

// `tessera kv-plan`'s command line: the named model shapes (presets), the flags, and the two
// outputs (a table, one JSON object). The sizing math itself is kv/kv_plan.h.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_plan.h"
#include "util/status.h"

namespace tessera::cli {

// The named presets: llama-2-7b, llama-2-13b, llama-2-70b, llama-3-8b, llama-3-70b, mistral-7b,
// smollm2-135m, tinyllama-1.1b.
const std::vector<kv::KvModelShape>& kv_model_presets();
std::optional<kv::KvModelShape> find_kv_preset(std::string_view name);  // case-insensitive

std::string render_kv_plan_table(const kv::KvPlan& plan);  // human-readable table
std::string render_kv_plan_json(const kv::KvPlan& plan);   // one JSON object

// The `kv-plan` subcommand: argv[0] is the subcommand name. Flags: --preset NAME | --layers N
// --kv-heads N --head-dim N [--heads N]; --memory SIZE, --weights SIZE, --context N,
// --avg-tokens N, --kv-dtype f16|f32|q8 (parse_kv_dtype, as for serve), --block-size N,
// --local-layers N --window W, --json, --list-presets. Prints to stdout (errors to stderr); returns the process exit code.
int run_kv_plan(int argc, char** argv);
// Same parsing without side effects, for tests and for callers that add their own flags.
Result<kv::KvPlanInput> parse_kv_plan_args(const std::vector<std::string>& args, bool* json_out);

}  // namespace tessera::cli

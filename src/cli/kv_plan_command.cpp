// tessera kv-plan: kv/'s sizing math, plus `--model FILE.gguf`: the shape (layers, KV heads, head
// dim, trained context) and the weight bytes are read from the GGUF file instead of a preset.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/kv_plan_flags.h"
#include "gguf/gguf.h"
#include "model/model_config.h"

namespace tessera::cli {

int kv_plan_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string model;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--model" || args[i] == "-m") {
      model = args[i + 1];
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      break;
    }
  }
  if (model.empty()) return run_kv_plan(argc, argv);

  auto file = gguf::GgufFile::open(model);
  if (!file) {
    std::fprintf(stderr, "tessera kv-plan: error: %s\n", file.error().message.c_str());
    return 1;
  }
  auto config = ModelConfig::from_gguf(*file);
  if (!config) {
    std::fprintf(stderr, "tessera kv-plan: error: %s\n", config.error().message.c_str());
    return 1;
  }
  size_t weight_bytes = 0;
  for (const gguf::TensorInfo& t : file->tensors()) weight_bytes += t.num_bytes;
  // The file's shape and weights go in as flags, so every other flag (and its checks) still applies.
  bool has_weights = false, has_context = false;
  for (const std::string& a : args) has_weights |= a == "--weights", has_context |= a == "--context";
  args.insert(args.begin(), {"--layers", std::to_string(config->num_layers), "--kv-heads",
                             std::to_string(config->num_kv_heads), "--head-dim", std::to_string(config->head_dim),
                             "--heads", std::to_string(config->num_heads)});
  if (config->num_local_layers() > 0) {
    args.insert(args.begin(), {"--local-layers", std::to_string(config->num_local_layers()), "--window",
                               std::to_string(config->sliding_window)});
  }
  if (!has_weights) args.insert(args.end(), {"--weights", std::to_string(weight_bytes)});
  if (!has_context) args.insert(args.end(), {"--context", std::to_string(config->context_length)});
  std::vector<char*> ptrs = {argv[0]};
  for (std::string& a : args) ptrs.push_back(a.data());
  std::fprintf(stderr, "tessera kv-plan: %s: %s, context %d, weights %.1f MiB\n", model.c_str(),
               config->describe().c_str(), config->context_length, weight_bytes / 1048576.0);
  return run_kv_plan(static_cast<int>(ptrs.size()), ptrs.data());
}

}  // namespace tessera::cli

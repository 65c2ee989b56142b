// tessera tokenize: the model's own tokenizer, without loading the weights' compute state.
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tessera::cli {

int tokenize_main(int argc, char** argv) {
  CLI::App app{"tessera tokenize: token ids of a text, as the model's tokenizer makes them"};
  std::string model, text;
  bool no_bos = false, special = false, json = false;
  app.add_option("-m,--model", model, "GGUF model file (default: SmolLM2-135M-Instruct)");
  app.add_option("text", text, "text to tokenize")->required();
  app.add_flag("--no-bos", no_bos, "never add BOS (default: as the model says)");
  app.add_flag("--special", special, "parse special tokens such as <|im_start|>");
  app.add_flag("--json", json, "print {\"ids\": [...]}");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (model.empty()) model = find_default_model();
  auto file = gguf::GgufFile::open(model);
  if (!file) {
    std::fprintf(stderr, "tessera tokenize: error: %s\n", file.error().message.c_str());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  if (!tok) {
    std::fprintf(stderr, "tessera tokenize: error: %s\n", tok.error().message.c_str());
    return 1;
  }
  const std::vector<int32_t> ids = tok->encode(text, tok->add_bos() && !no_bos, special);
  if (json) {
    std::printf("%s\n", nlohmann::json({{"ids", ids}}).dump().c_str());
  } else {
    for (int32_t id : ids) {
      const std::string piece = tok->token_to_piece(id, true);
      std::printf("%6d  '%s'\n", id, piece.c_str());
    }
  }
  return 0;
}

}  // namespace tessera::cli

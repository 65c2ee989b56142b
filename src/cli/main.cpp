// tessera: one binary, several subcommands.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: tessera <command> [flags]   (tessera <command> --help for its flags)\n\n"
               "  run        generate from one prompt, streaming tokens (default model: SmolLM2-135M-Instruct)\n"
               "  chat       an interactive conversation in the terminal (one message per line from a pipe)\n"
               "  serve      OpenAI-compatible HTTP server (127.0.0.1:8000)\n"
               "  bench      offline throughput / batch sweep, or `bench serve` (load generator)\n"
               "  kv-plan    KV-cache sizing math\n"
               "  tokenize   token ids of a text\n"
               "  quantize   IN.gguf OUT.gguf TYPE\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    // No command: the main job, `tessera run` with the default model.
    return tessera::cli::run_main(1, argv);
  }
  const std::string cmd = argv[1];
  // Each subcommand sees argv[0] = "tessera <cmd>" and its own flags.
  std::string name = std::string("tessera ") + cmd;
  argv[1] = name.data();
  if (cmd == "run") return tessera::cli::run_main(argc - 1, argv + 1);
  if (cmd == "chat") return tessera::cli::chat_main(argc - 1, argv + 1);
  if (cmd == "serve") return tessera::cli::serve_main(argc - 1, argv + 1);
  if (cmd == "bench") return tessera::cli::bench_main(argc - 1, argv + 1);
  if (cmd == "kv-plan") return tessera::cli::kv_plan_main(argc - 1, argv + 1);
  if (cmd == "tokenize") return tessera::cli::tokenize_main(argc - 1, argv + 1);
  if (cmd == "quantize") return tessera::cli::quantize_main(argc - 1, argv + 1);
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    usage();
    return 0;
  }
  std::fprintf(stderr, "tessera: unknown command '%s'\n", cmd.c_str());
  usage();
  return 2;
}

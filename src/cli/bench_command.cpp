// tessera bench: offline benchmarks over the engine (throughput, sweep) and the serving load
// generator (serve). See bench/README.md.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/offline_bench.h"

namespace tessera::cli {

int bench_main(int argc, char** argv) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  std::string name = "tessera bench " + mode;
  if (mode == "throughput" || mode == "sweep") {
    argv[1] = name.data();
    return offline_bench_main(mode, argc - 1, argv + 1);
  }
  if (mode == "serve") {
    argv[1] = name.data();
    return bench_serve_main(argc - 1, argv + 1);
  }
  std::fprintf(stderr,
               "usage: tessera bench throughput [flags]   offline throughput, TTFT, TPOT, batch occupancy\n"
               "       tessera bench sweep [flags]        throughput vs TPOT across --max-num-seqs values (+ PNG)\n"
               "       tessera bench serve [flags]        load generator for any OpenAI-compatible server\n");
  return 2;
}

}  // namespace tessera::cli

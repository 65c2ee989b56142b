// The tessera subcommands. Each takes the arguments after its name and returns the exit code.
#pragma once

namespace tessera::cli {

int run_main(int argc, char** argv);       // tessera run: one prompt, streamed to the terminal
int tokenize_main(int argc, char** argv);  // tessera tokenize
int bench_main(int argc, char** argv);     // tessera bench throughput|sweep|serve
int quantize_main(int argc, char** argv);  // tessera quantize IN OUT TYPE

}  // namespace tessera::cli

// The tessera subcommands. Each takes the arguments after its name and returns the exit code.
#pragma once

namespace tessera::cli {

int run_main(int argc, char** argv);       // tessera run: one prompt, streamed to the terminal
int tokenize_main(int argc, char** argv);  // tessera tokenize
int bench_main(int argc, char** argv);     // tessera bench throughput|sweep|serve
int quantize_main(int argc, char** argv);  // tessera quantize IN OUT TYPE
int kv_plan_main(int argc, char** argv);   // tessera kv-plan (kv/ math; --model reads a GGUF)

}  // namespace tessera::cli

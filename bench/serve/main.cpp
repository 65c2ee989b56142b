// tessera-bench-serve: the serving load generator as a standalone program (the same code as
// `tessera bench serve`); it needs no model, only an OpenAI-compatible server to point at.
#include "cli/commands.h"

int main(int argc, char** argv) { return tessera::cli::bench_serve_main(argc, argv); }

// The tessera subcommands. Each takes the arguments after its name and returns the exit code.
#pragma once

namespace tessera::cli {

int run_main(int argc, char** argv);       // tessera run: one prompt, streamed to the terminal
// tessera chat: a conversation (history, slash commands, Ctrl-C stops an answer); stdin not a
// terminal: one message per line, each answer and a newline on stdout. Exit 0 on /bye, Ctrl-D or
// Ctrl-C at the prompt; 1 on bad flags or a model that fails to load, and from a pipe when a
// turn or a command failed.
int chat_main(int argc, char** argv);
// tessera serve: creates the Engine (Engine::create) and serves the OpenAI API (server/HttpServer)
// until SIGINT or SIGTERM, then drains (in-flight requests finish within --shutdown-grace, the rest
// are aborted) and exits 0. Defaults: the default model on 127.0.0.1:8000. Exit 1 on bad flags or a
// model that fails to load, 2 when the address cannot be bound.
int serve_main(int argc, char** argv);
int tokenize_main(int argc, char** argv);  // tessera tokenize
int bench_main(int argc, char** argv);     // tessera bench throughput|sweep|serve
// tessera bench serve: load generator for any OpenAI-compatible server (needs no engine). Exit 0
// when every requested rate ran (failed requests are counted, not fatal).
int bench_serve_main(int argc, char** argv);
int quantize_main(int argc, char** argv);  // tessera quantize IN OUT TYPE
int kv_plan_main(int argc, char** argv);   // tessera kv-plan (kv/ math; --model reads a GGUF)

}  // namespace tessera::cli

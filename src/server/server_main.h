// Entry points the `tessera` CLI calls for `tessera serve` and `tessera bench serve`.
// argv[0] is the command's display name; the rest are its flags (CLI11; --help lists them).
#pragma once

namespace tessera::server {

// `tessera serve`: creates the Engine (Engine::create) and serves the OpenAI API until SIGINT or
// SIGTERM, then drains (in-flight requests finish within --shutdown-grace, the rest are
// aborted) and exits 0. Defaults: the default model on 127.0.0.1:8000. Exit 1 on bad flags or a
// model that fails to load, 2 when the address cannot be bound.
int serve_main(int argc, char** argv);

// `tessera bench serve`: load generator for any OpenAI-compatible server (needs no engine).
// Exit 0 when every requested rate ran (failed requests are counted, not fatal).
int bench_serve_main(int argc, char** argv);

}  // namespace tessera::server

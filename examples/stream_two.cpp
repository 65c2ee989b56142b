// Embedding tessera: load a model, submit two requests, stream their tokens as they come.
//   stream_two MODEL.gguf [max_tokens]
// Both requests are in the engine at once (continuous batching: one forward pass per step serves
// both); each prints its text deltas tagged with its request number. Greedy, so the output repeats.
#include <tessera/engine.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [max_tokens]\n", argv[0]);
    return 2;
  }
  tessera::EngineConfig config;
  config.model_path = argv[1];
  config.kv_cache_bytes = int64_t{64} << 20;  // two short requests need little
  tessera::Result<std::unique_ptr<tessera::Engine>> created = tessera::Engine::create(config);
  if (!created.ok()) {
    std::fprintf(stderr, "error: %s\n", created.error().message.c_str());
    return 1;
  }
  tessera::Engine& engine = *created.value();
  std::printf("model %s, context %d tokens\n", engine.model_info().name.c_str(), engine.model_info().context_length);

  const std::vector<std::string> questions = {"What is the capital of France?", "Name three primary colors."};
  std::vector<std::shared_ptr<tessera::RequestStream>> streams;
  for (const std::string& question : questions) {
    tessera::Result<tessera::ChatPrompt> prompt =
        engine.chat_prompt(tessera::chat_template_input({{"user", question}}), engine.model_info().add_bos);
    if (!prompt.ok()) {
      std::fprintf(stderr, "error: %s\n", prompt.error().message.c_str());
      return 1;
    }
    tessera::SamplingParams params;
    params.temperature = 0.0f;  // greedy
    params.max_tokens = argc > 2 ? std::atoi(argv[2]) : 24;
    tessera::Result<std::shared_ptr<tessera::RequestStream>> stream = engine.submit({prompt.value().ids, params, ""});
    if (!stream.ok()) {
      std::fprintf(stderr, "error: %s\n", stream.error().message.c_str());
      return 1;
    }
    streams.push_back(stream.value());
  }
  // Read both streams round-robin until both have finished.
  std::vector<std::string> answers(streams.size());
  std::vector<bool> done(streams.size(), false);
  for (size_t left = streams.size(); left > 0;) {
    for (size_t i = 0; i < streams.size(); ++i) {
      if (done[i]) continue;
      while (std::optional<tessera::RequestOutput> out = streams[i]->next(std::chrono::milliseconds(10))) {
        answers[i] += out->text_delta;
        if (!out->text_delta.empty()) std::printf("[%zu] %s\n", i, out->text_delta.c_str());
        if (out->finish_reason != tessera::FinishReason::kNone) {
          std::printf("[%zu] finished (%s): %d prompt + %d generated tokens\n", i,
                      tessera::finish_reason_name(out->finish_reason), out->num_prompt_tokens, out->num_output_tokens);
          done[i] = true;
          --left;
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < answers.size(); ++i) std::printf("answer %zu: %s\n", i, answers[i].c_str());
  engine.shutdown(std::chrono::milliseconds(0));
  return 0;
}

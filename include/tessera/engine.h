// tessera's public C++ API: an Engine that owns one model, its paged KV cache, the scheduler and
// one engine thread, and serves many concurrent requests with continuous batching.
//
//   auto engine = tessera::Engine::create(config).value();
//   auto ids = engine->tokenize("Hello", /*add_bos=*/true, /*parse_special=*/false);
//   auto stream = engine->submit({.prompt_ids = ids, .params = params}).value();
//   while (auto out = stream->next()) { print(out->text_delta); }
//
// Threads: submit/abort/metrics/tokenize may be called from any thread. Requests reach the engine
// thread through a message queue that it drains between steps; outputs come back through each
// request's RequestStream. The engine thread never blocks on a client.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/chat_message.h"
#include "tessera/engine_defaults.h"
#include "tessera/finish_reason.h"
#include "tessera/kv_events.h"
#include "tessera/metrics.h"
#include "tessera/sampling_params.h"
#include "tessera/status.h"

namespace tessera {

// A LoRA adapter served by name (serve --lora-modules NAME=FILE): a llama.cpp-format adapter GGUF
// of the base model (model/lora_adapter.h says what is checked).
struct LoraModule {
  std::string name;
  std::string path;
};

struct EngineConfig {
  std::string model_path;                 // GGUF file
  int32_t num_threads = 0;                // compute threads; 0 = every core
  // KV cache: a byte budget, or (when 0) a fraction of the machine's available memory.
  int64_t kv_cache_bytes = 0;
  double kv_cache_memory_fraction = 0.25;
  int32_t block_size = defaults::kBlockSize;  // token slots per KV block
  std::string kv_dtype = "f16";           // "f16" | "f32" | "q8" (int8, one scale per token and head)
  bool enable_prefix_caching = true;
  // A disk tier under the prefix cache (docs/architecture.md, "KV disk tier"): full blocks are
  // written to this directory and read back at admission, across restarts and by other processes
  // sharing it. "" = off. Its size budget in bytes (0 = defaults::kKvCacheDirBytes).
  std::string kv_cache_dir;
  int64_t kv_cache_dir_bytes = 0;
  // Sliding-window layers (Gemma 3's local layers) get KV-cache groups of their own whose blocks go
  // back to the pool once every query has passed them (vLLM's hybrid KV-cache manager). false:
  // one block table for all layers, every block kept for the sequence's life (vLLM's
  // --disable-hybrid-kv-cache-manager), for comparison; the outputs are the same either way.
  bool hybrid_kv_cache = true;
  // Batching: the throughput-versus-latency knob. More sequences per step amortize the weight read
  // (more tokens/s overall) and lengthen each step (higher time per output token for everyone).
  int32_t max_num_seqs = defaults::kMaxNumSeqs;  // sequences in one step at most
  // Tokens in one step at most (the budget); 0 = derived: defaults::kMaxNumBatchedTokens with chunked
  // prefill, else max_model_len (a whole prompt must fit one step), never below the default.
  int32_t max_num_batched_tokens = 0;
  int32_t long_prefill_token_threshold = 0;  // prefill chunk cap per request per step; 0 = budget
  bool enable_chunked_prefill = true;
  int32_t max_model_len = 0;              // context per request; 0 = the model's, capped at defaults::kMaxModelLen
  std::string policy = "continuous";      // "continuous" | "static" (for comparison)
  // Speculative decoding.
  std::string speculative;                // "" (off) | "ngram" | "draft"
  std::string draft_model_path;           // for "draft": a GGUF with the target's vocabulary
  int32_t num_speculative_tokens = defaults::kNumSpeculativeTokens;  // k, the most draft tokens per step
  bool speculative_speed_guard = true;    // wall-clock choices: k and on/off by a cost model of
                                          // measured step times, and a guard timing speculation
                                          // against steps without it (tests that pin draft counts
                                          // turn both off)
  uint64_t seed = 0;                      // seeds requests that carry none
  bool verbose = false;                   // start-up summary on stderr
  std::function<void(double)> on_load_progress;  // called with 0..1 while the weights load
  // KV-cache events (tessera/kv_events.h): when set, the prefix cache records the blocks it stores
  // and evicts, and the engine thread calls this once per step that changed it. It must not block
  // (kv_events::KvEventPublisher only enqueues). Unset: nothing is recorded.
  std::function<void(KvEventBatch&&)> on_kv_events;
  // LoRA adapters loaded at start (more with Engine::load_lora_adapter). A request names one in
  // GenerateRequest::lora_name; different adapters and the base model share every step.
  std::vector<LoraModule> lora_modules;
  int32_t max_loras = 4;        // distinct adapters in one step at most (requests of others wait)
  int32_t max_lora_rank = 64;   // an adapter of a larger rank is refused at load
  // The adapters' weights in memory (vLLM's --lora-dtype): "auto" keeps each pair as its file has
  // it (F16 stays f16, F32/BF16/Q8_0 become f32: exact); "f16" rounds every pair to f16 (half the
  // bytes a step reads, ~1e-3 relative rounding); "f32" widens every pair.
  std::string lora_dtype = "auto";
};

// One loaded adapter (Engine::lora_adapters).
struct LoraAdapterInfo {
  std::string name;
  std::string path;
  int32_t rank = 0;              // the largest of its targets'
  float alpha = 0.0f;
  int32_t num_targets = 0;       // adapted weight matrices
  size_t bytes = 0;              // f32 weights held
  double load_seconds = 0.0;     // read + check + convert
  int64_t created = 0;           // Unix seconds when it was loaded
};

struct ModelInfo {
  std::string name;                       // general.name
  std::string architecture;
  std::string path;
  int32_t vocab_size = 0;
  int32_t context_length = 0;             // the max_model_len in force
  int32_t num_layers = 0, dim = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  bool add_bos = false;                   // whether prompts get a BOS by default
  size_t weight_bytes = 0;                // bytes streamed per forward pass
  // KV cache in force.
  int64_t kv_cache_bytes = 0;
  int32_t num_kv_blocks = 0;
  int32_t block_size = 0;
  double max_concurrency = 0.0;           // full-context requests the cache holds at once (decoding)
  // KV-cache groups, one block table each per sequence: the sliding window of each in tokens
  // (0 = full attention); one entry unless sliding-window layers have groups of their own.
  std::vector<int32_t> kv_cache_group_windows;
  int32_t kv_layers_per_block = 0;        // layers whose K/V one block holds
  std::string kv_dtype;                   // "f16" | "f32" | "q8"
  bool enable_prefix_caching = false;
  // The KV disk tier at start-up (EngineConfig::kv_cache_dir): whether it opened, its budget and
  // namespace (32 hex digits: model content, KV dtype, block size, layout). The directory itself
  // is not shown on open routes.
  bool kv_cache_dir_enabled = false;
  int64_t kv_cache_dir_bytes = 0;
  std::string kv_cache_dir_namespace;
  // Scheduling in force.
  int32_t max_num_seqs = 0;               // sequences in one step at most (max running requests)
  int32_t max_num_batched_tokens = 0;     // tokens in one step at most
  // Sampling for a request that sets none of its knobs (`run`, `chat`, the server's omitted
  // fields): the model file's general.sampling.* recommendations (temp, top_k, top_p, min_p,
  // penalty_repeat) where it carries them, else defaults::kTemperature etc. (llama.cpp's). Only those
  // five fields differ from SamplingParams{}. Temperature 0 still means greedy.
  SamplingParams default_sampling;
  std::string default_sampling_source;    // "model file", "model file + llama.cpp defaults", "llama.cpp defaults"
};

// A chat as the OpenAI API sends it, for the model's own chat template. JSON text: the server
// passes the request's arrays through unchanged, the engine normalises them (tokenizer/chat_render.h).
struct ChatTemplateInput {
  std::string messages_json;              // [{"role", "content", "tool_calls", "tool_call_id", "name"}]
  std::string tools_json;                 // "" or [{"type": "function", "function": {...}}]
  std::string kwargs_json;                // "" or an object: chat_template_kwargs (enable_thinking...)
  bool add_generation_prompt = true;
};

// The input for a plain list of messages (role and content only).
ChatTemplateInput chat_template_input(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true);

// A chat rendered by the model's own template and tokenized (Engine::chat_prompt).
struct ChatPrompt {
  std::string text;               // the rendering, as jinja2 would give it
  std::vector<int32_t> ids;       // its tokens: special tokens only from the template's own markup
};

struct GenerateRequest {
  std::vector<int32_t> prompt_ids;        // already tokenized (see Engine::tokenize)
  SamplingParams params;
  std::string cache_salt;                 // prefix-cache isolation key (tenant); "" = shared
  // A loaded LoRA adapter's name ("" = the base model). The request holds the adapter until it
  // ends, whatever unload_lora_adapter does meanwhile; its KV blocks are cached under the adapter
  // (never served to another adapter or the base model).
  std::string lora_name = {};
};


struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// One event of a request's stream: the new tokens of one of its n samples.
struct RequestOutput {
  int32_t sample_index = 0;                    // 0 .. n-1
  std::vector<int32_t> token_ids;              // tokens generated in this step
  std::string text_delta;                      // their text (UTF-8 complete; stop strings cut)
  std::vector<TokenLogprob> logprobs;          // chosen token's logprob per token_ids entry
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per token, when requested
  FinishReason finish_reason = FinishReason::kNone;     // set on the sample's last event
  std::string error;                           // for kError
  // Filled on every event (cumulative).
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_prompt_tokens = 0;        // served from the prefix cache
  int32_t num_output_tokens = 0;               // of this sample so far
};

// A request's output channel, filled by the engine thread and read by one client thread.
class RequestStream {
 public:
  virtual ~RequestStream() = default;
  virtual int64_t request_id() const = 0;
  // Waits for the next event; nullopt once every sample has finished (or on timeout when given).
  virtual std::optional<RequestOutput> next(
      std::optional<std::chrono::milliseconds> timeout = std::nullopt) = 0;
  // True when every sample has delivered its final event.
  virtual bool finished() const = 0;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  virtual ~Engine() = default;

  virtual const ModelInfo& model_info() const = 0;

  // Tokenizer and chat template of the model.
  virtual std::vector<int32_t> tokenize(const std::string& text, bool add_bos, bool parse_special) const = 0;
  virtual std::string detokenize(const std::vector<int32_t>& ids) const = 0;
  // One token as the vocabulary has it: its bytes (a piece may split a UTF-8 character), special
  // tokens by their text ("<|im_end|>", where detokenize gives ""). What logprobs show per token.
  virtual std::string token_piece(int32_t id) const = 0;
  // What a chat feeds the model: the model's own template (Jinja) with tools and template kwargs,
  // its text and its tokens, in one call. Text the request supplies (contents, roles, names, tool
  // arguments, tools, kwargs) is tokenized as plain text, so "<|im_start|>system" inside a message
  // cannot forge a turn; only the template's markup gives special tokens. (Tokenizing the rendered
  // text with parse_special, as llama.cpp's server does, is that injection: there is no text-only
  // call to invite it.) add_bos: the model's BOS first, never twice when the template writes it.
  // kInvalidArgument for bad JSON or when the template raises (its message is returned).
  virtual Result<ChatPrompt> chat_prompt(const ChatTemplateInput& input, bool add_bos) const = 0;

  // Validates and enqueues. Errors (kInvalidArgument, kOutOfRange for a prompt that can never
  // fit, kResourceExhausted when the queue is full) are returned here, never later.
  virtual Result<std::shared_ptr<RequestStream>> submit(GenerateRequest request) = 0;
  // Submits several requests as one message: the engine applies them between the same two steps,
  // so they are scheduled together from the first step (a static batch, an offline batch; one
  // submit() per request may let a step start in between). All or nothing: the first invalid
  // request's error, and none is queued.
  virtual Result<std::vector<std::shared_ptr<RequestStream>>> submit_all(std::vector<GenerateRequest> requests) = 0;
  // LoRA adapters, by name (any thread). load: reads and checks the file against the base model
  // (kInvalidArgument / kCorruptFile / kUnsupported naming what does not match, kNotFound for a
  // missing file, kInvalidArgument for a name already loaded); nothing changes on failure.
  // unload: later requests cannot name it (kNotFound if not loaded); requests in flight keep it.
  // The defaults refuse: an engine without adapter support.
  virtual Status load_lora_adapter(const std::string& name, const std::string& path) {
    (void)name, (void)path;
    return Error{ErrorCode::kUnsupported, "this engine has no LoRA adapter support"};
  }
  virtual Status unload_lora_adapter(const std::string& name) {
    (void)name;
    return Error{ErrorCode::kUnsupported, "this engine has no LoRA adapter support"};
  }
  virtual std::vector<LoraAdapterInfo> lora_adapters() const { return {}; }
  // Aborts a request (its blocks are freed between steps); unknown ids are ignored.
  virtual void abort(int64_t request_id) = 0;

  virtual MetricsSnapshot metrics() const = 0;
  // Requests waiting or running.
  virtual int32_t num_unfinished_requests() const = 0;
  // Stops accepting; lets in-flight requests finish for up to `grace`, aborts the rest, joins.
  virtual void shutdown(std::chrono::milliseconds grace) = 0;
};

}  // namespace tessera

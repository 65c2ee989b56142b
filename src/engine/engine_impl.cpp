#include "engine/engine_impl.h"

#include "engine/engine_config.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "sample/sampler.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/chat_template.h"
#include "kernels/kernels_info.h"
#include "kv/kv_plan.h"
#include "util/log.h"

namespace tessera {

namespace {

int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return int64_t{8} << 30;
}

std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}

// Requests of max_model_len tokens the cache holds while they decode: the blocks of a full group
// are ceil(L / bs) per request, a sliding group's at most its window's (kv::max_kv_blocks_held, one
// token per step); one full group gives (blocks x bs) / L.
double full_context_concurrency(std::span<const int32_t> windows, int32_t num_blocks, int32_t block_size,
                                int32_t max_model_len) {
  double per_request = 0.0;
  for (int32_t w : windows) {
    const double full = static_cast<double>(max_model_len) / block_size;
    const int32_t one[] = {w};
    per_request += w == 0 ? full
                          : std::min(full, static_cast<double>(kv::max_kv_blocks_held(one, block_size, max_model_len, 1)));
  }
  return per_request > 0 ? num_blocks / per_request : 0.0;
}

// ModelInfo::default_sampling: the file's recommendations over llama.cpp's defaults; *source says
// which of the two the five knobs came from.
SamplingParams default_sampling(const RecommendedSampling& r, std::string* source) {
  SamplingParams p;
  p.temperature = r.temperature.value_or(defaults::kTemperature);
  p.top_k = r.top_k.value_or(defaults::kTopK);
  p.top_p = r.top_p.value_or(defaults::kTopP);
  p.min_p = r.min_p.value_or(defaults::kMinP);
  p.repetition_penalty = r.repetition_penalty.value_or(defaults::kRepetitionPenalty);
  const bool all = r.temperature && r.top_k && r.top_p && r.min_p && r.repetition_penalty;
  *source = all ? "model file" : r.any() ? "model file + llama.cpp defaults" : "llama.cpp defaults";
  return p;
}

// The start-up summary (EngineConfig::verbose): the model and kernels, the KV cache in force, and
// for models with sliding-window layers how its blocks are laid out (kv/kv_cache_layout.h).
void print_startup_lines(const ModelInfo& info, const ModelConfig& mc, const EngineConfigs& d,
                         const EngineConfig& config) {
  std::fprintf(stderr,
               "tessera: model %s (%s; %d query heads), %d threads, kernels %s\n"
               "tessera: KV cache %.1f MiB (%s, %lld bytes/token over %d layers): %d blocks of %d tokens x %d "
               "layers, %.1f requests at the full context of %d tokens\n",
               info.name.c_str(), mc.describe().c_str(), info.num_heads, d.num_threads,
               std::string(kernels::active_isa()).c_str(), static_cast<double>(info.kv_cache_bytes) / (1 << 20),
               kv_dtype_name(d.kv_dtype), static_cast<long long>(d.bytes_per_token), mc.num_layers,
               info.num_kv_blocks, info.block_size, info.kv_layers_per_block, info.max_concurrency,
               info.context_length);
  const SamplingParams& s = info.default_sampling;
  std::fprintf(stderr, "tessera: default sampling (%s): temperature %.2f, top_k %d, top_p %.2f, min_p %.2f, "
               "repetition_penalty %.2f\n", info.default_sampling_source.c_str(), s.temperature, s.top_k, s.top_p,
               s.min_p, s.repetition_penalty);
  if (mc.num_local_layers() == 0) return;
  kv::KvPlanInput in;  // the per-sequence bytes with and without freeing (kv/ KvPlan's arithmetic)
  in.shape = {mc.name, mc.num_layers, mc.num_heads, mc.num_kv_heads, mc.head_dim, info.context_length, 0,
              mc.num_local_layers(), mc.sliding_window};
  in.context = info.context_length;
  in.block_size = config.block_size;
  in.kv_dtype = d.kv_dtype;  // q8 sized as KvStorage stores it (kv_row_bytes)
  auto plan = kv::compute_kv_plan(in);
  if (!plan) return;
  const double kept_mib = static_cast<double>(plan->bytes_per_sequence_kept) / (1 << 20);
  const double freed_mib = static_cast<double>(plan->bytes_per_sequence_freed) / (1 << 20);
  const auto& windows = d.kv_layout.group_windows;
  if (std::any_of(windows.begin(), windows.end(), [](int32_t w) { return w > 0; })) {
    std::fprintf(stderr,
                 "tessera: KV layout: %d local layers (%d-token window) + %d global in %d KV-cache group(s) of %d "
                 "layers, blocks behind a window go back to the pool: %.1f MiB per full-context sequence "
                 "(%.1f MiB if every block were kept)\n",
                 mc.num_local_layers(), mc.sliding_window, mc.num_layers - mc.num_local_layers(),
                 d.kv_layout.num_groups(), d.kv_layout.num_slots, freed_mib, kept_mib);
  } else {
    std::fprintf(stderr,
                 "tessera: KV layout: %d local layers (%d-token window, attention skips keys before it) + %d "
                 "global, one block table for all layers%s: %.1f MiB per full-context sequence (%.1f MiB with "
                 "the blocks behind the window freed)\n",
                 mc.num_local_layers(), mc.sliding_window, mc.num_layers - mc.num_local_layers(),
                 config.hybrid_kv_cache ? "" : " (hybrid KV cache off)", kept_mib, freed_mib);
  }
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
  auto impl = EngineImpl::create_impl(config);
  if (!impl) return impl.error();
  return std::unique_ptr<Engine>(std::move(*impl));
}

Result<std::unique_ptr<EngineImpl>> EngineImpl::create_impl(const EngineConfig& config) {
  std::unique_ptr<EngineImpl> e(new EngineImpl());
  e->config_ = config;
  TESSERA_TRY(validate_engine_config(config));  // the cheap errors before the weights load

  auto model = LlamaModel::load(config.model_path, config.on_load_progress);
  if (!model) return model.error();
  e->model_ = std::move(*model);
  auto tok = tokenizer::Tokenizer::from_gguf(e->model_->file());
  if (!tok) return tok.error().with_context("loading tokenizer");
  e->tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(*tok));
  const ModelConfig& mc = e->model_->config();

  auto derived = derive_engine_configs(config, mc, available_memory_bytes());
  if (!derived) return derived.error();
  const EngineConfigs& d = *derived;
  const int32_t max_model_len = d.max_model_len;
  const int32_t num_blocks = d.num_blocks;
  e->scheduler_ = std::make_unique<sched::Scheduler>(d.scheduler);
  e->kv_ = std::make_unique<KvStorage>(
      mc, num_blocks, config.block_size, d.kv_dtype,
      KvSlotMap{d.kv_layout.layer_group, d.kv_layout.layer_slot, d.kv_layout.num_slots});
  e->runner_ = std::make_unique<ModelRunner>(*e->model_, *e->kv_, d.runner);

  if (!config.speculative.empty()) {
    auto spec = spec::SpecDecoder::create(d.spec, *e->model_);  // n-gram or draft model
    if (!spec) return spec.error();
    e->spec_ = std::move(*spec);
  }
  e->eos_ids_ = e->tokenizer_->eog_ids();
  e->grammar_cache_ = std::make_unique<grammar::GrammarCache>(
      std::make_shared<const grammar::TokenTable>(grammar_vocabulary(*e->tokenizer_)));

  ModelInfo& info = e->info_;
  info.name = mc.name;
  info.architecture = mc.architecture;
  info.path = config.model_path;
  info.vocab_size = mc.vocab_size;
  info.context_length = max_model_len;
  info.num_layers = mc.num_layers;
  info.dim = mc.dim;
  info.num_heads = mc.num_heads;
  info.num_kv_heads = mc.num_kv_heads;
  info.head_dim = mc.head_dim;
  info.bos_id = e->tokenizer_->bos_id();
  info.eos_id = e->tokenizer_->eos_id();
  info.add_bos = e->tokenizer_->add_bos();
  info.weight_bytes = e->model_->weight_bytes_per_pass();
  info.kv_cache_bytes = static_cast<int64_t>(num_blocks - 1) * d.block_bytes;
  info.num_kv_blocks = num_blocks - 1;
  info.block_size = config.block_size;
  info.max_concurrency = full_context_concurrency(d.kv_layout.group_windows, num_blocks - 1, config.block_size,
                                                  max_model_len);
  info.kv_cache_group_windows = d.kv_layout.group_windows;
  info.kv_layers_per_block = d.kv_layout.num_slots;
  info.kv_dtype = kv_dtype_name(d.kv_dtype);
  info.enable_prefix_caching = config.enable_prefix_caching;
  info.max_num_seqs = d.scheduler.max_num_seqs;
  info.max_num_batched_tokens = d.scheduler.max_num_batched_tokens;
  info.default_sampling = default_sampling(mc.sampling, &info.default_sampling_source);
  for (const std::string& key : mc.sampling.ignored) {
    std::fprintf(stderr, "tessera: warning: %s in the model file is out of range; using the default\n", key.c_str());
  }
  if (config.verbose) print_startup_lines(info, mc, d, config);

  MetricsSnapshot& m = e->live_metrics_;
  m.time_to_first_token = Histogram::with_bounds(latency_buckets());
  m.inter_token_latency = Histogram::with_bounds(latency_buckets());
  m.e2e_request_latency = Histogram::with_bounds(latency_buckets());
  m.request_queue_time = Histogram::with_bounds(latency_buckets());
  m.spec_accepted_per_position.assign(static_cast<size_t>(std::max(1, config.num_speculative_tokens)), 0);
  e->publish_metrics();
  e->thread_ = std::thread([raw = e.get()] { raw->loop(); });
  return e;
}

EngineImpl::~EngineImpl() { shutdown(std::chrono::milliseconds(0)); }

std::vector<int32_t> EngineImpl::tokenize(const std::string& text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> ids = tokenizer_->encode(text, add_bos, parse_special);
  // A rendered chat template that writes the BOS itself (Gemma's, Llama 3's) must not get a second
  // one: the model never saw "<bos><bos>" (HF's apply_chat_template adds no special tokens).
  if (add_bos && parse_special && ids.size() >= 2 && ids[0] == info_.bos_id && ids[1] == info_.bos_id) {
    ids.erase(ids.begin());
  }
  return ids;
}

std::string EngineImpl::detokenize(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> valid;
  valid.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < info_.vocab_size) valid.push_back(id);
  }
  return tokenizer_->decode(valid);
}

std::string EngineImpl::token_piece(int32_t id) const {
  return tokenizer_->token_to_piece(id, /*render_special=*/true);
}

const tokenizer::ChatRenderer& EngineImpl::chat_renderer() const {
  std::call_once(chat_renderer_once_, [this] {
    const std::string source = model_->file().get_string_or("tokenizer.chat_template", "");
    const std::string bos = info_.bos_id >= 0 ? tokenizer_->token_text(info_.bos_id) : "";
    const std::string eos = info_.eos_id >= 0 ? tokenizer_->token_text(info_.eos_id) : "";
    // A file with no template (Gemma-3-270M's) is rendered in the family its vocabulary's turn
    // markers name, not as ChatML.
    std::string markers = tokenizer::vocab_turn_markers(
        [this](const char* text) { return tokenizer_->token_id(text) >= 0; });
    chat_renderer_ = std::make_unique<tokenizer::ChatRenderer>(source, bos, eos, std::move(markers));
  });
  return *chat_renderer_;
}

ChatTemplateInput chat_template_input(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  ChatTemplateInput input;
  input.messages_json = list.dump();
  input.add_generation_prompt = add_generation_prompt;
  return input;
}

namespace {

Result<tokenizer::ChatRenderInput> parse_chat_input(const ChatTemplateInput& in) {
  using ojson = nlohmann::ordered_json;
  tokenizer::ChatRenderInput input;
  auto parse = [](const std::string& text, const char* what, ojson* out) -> Status {
    if (text.empty()) return ok_status();
    *out = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
    if (out->is_discarded()) return make_error(ErrorCode::kInvalidArgument, "{} is not valid JSON", what);
    return ok_status();
  };
  TESSERA_TRY(parse(in.messages_json, "messages", &input.messages));
  TESSERA_TRY(parse(in.tools_json, "tools", &input.tools));
  TESSERA_TRY(parse(in.kwargs_json, "chat_template_kwargs", &input.kwargs));
  input.add_generation_prompt = in.add_generation_prompt;
  return input;
}

}  // namespace

Result<ChatPrompt> EngineImpl::chat_prompt(const ChatTemplateInput& in, bool add_bos) const {
  Result<tokenizer::ChatRenderInput> input = parse_chat_input(in);
  if (!input.ok()) return input.error();
  return tokenizer::render_chat_prompt(chat_renderer(), *tokenizer_, *input, add_bos);
}

}  // namespace tessera

// EngineImpl: create (the model, tokenizer, scheduler, runner and managers) and the tokenizer and
// chat-template facade.
#include "engine/engine_impl.h"

#include "engine/engine_config.h"
#include "engine/engine_startup.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/chat_prompt.h"
#include "tokenizer/chat_template.h"
#include "util/log.h"

namespace tessera {

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
  auto impl = EngineImpl::create_impl(config);
  if (!impl) return impl.error();
  return std::unique_ptr<Engine>(std::move(*impl));
}

Result<std::unique_ptr<EngineImpl>> EngineImpl::create_impl(const EngineConfig& config,
                                                          const std::function<void(EngineConfigs&)>& adjust) {
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
  if (adjust) adjust(*derived);
  const EngineConfigs& d = *derived;
  e->scheduler_ = std::make_unique<sched::Scheduler>(d.scheduler);
  e->kv_ = std::make_unique<KvStorage>(
      mc, d.num_blocks, config.block_size, d.kv_dtype,
      KvSlotMap{d.kv_layout.layer_group, d.kv_layout.layer_slot, d.kv_layout.num_slots});
  e->runner_ = std::make_unique<ModelRunner>(*e->model_, *e->kv_, d.runner);
  e->disk_ = EngineDiskTier::open(config, *e->model_, d, *e->kv_);  // null when off or unusable

  if (!config.speculative.empty()) {
    auto spec = speculative::SpecDecoder::create(d.spec, *e->model_);  // n-gram or draft model
    if (!spec) return spec.error();
    e->spec_ = std::move(*spec);
  }
  e->eos_ids_ = e->tokenizer_->eog_ids();
  e->structured_ = std::make_unique<structured::StructuredOutputs>(*e->tokenizer_, mc.vocab_size);
  auto loras = EngineLoras::create(e->model_->config(), config);  // loads --lora-modules
  if (!loras) return loras.error();
  e->loras_ = std::move(*loras);

  e->info_ = make_model_info(config, *e->model_, *e->tokenizer_, d);
  if (e->disk_) {
    e->info_.kv_cache_dir_enabled = true;
    e->info_.kv_cache_dir_bytes = e->disk_->max_bytes();
    e->info_.kv_cache_dir_namespace = e->disk_->namespace_hex();
  }
  for (const std::string& key : mc.sampling.ignored) {
    std::fprintf(stderr, "tessera: warning: %s in the model file is out of range; using the default\n", key.c_str());
  }
  if (config.verbose) print_startup_lines(e->info_, mc, d, config);
  if (config.verbose && e->disk_) {
    std::fprintf(stderr, "tessera: KV disk tier %s/%s: %.1f GiB budget, %lld blocks of %zu bytes there\n",
                 config.kv_cache_dir.c_str(), e->info_.kv_cache_dir_namespace.c_str(),
                 static_cast<double>(e->info_.kv_cache_dir_bytes) / (1 << 30),
                 static_cast<long long>(e->disk_->num_files()), e->kv_->block_payload_bytes());
  }

  e->metrics_ = std::make_unique<EngineMetrics>(config.num_speculative_tokens);
  e->metrics_->live().max_loras = config.max_loras;
  e->metrics_->publish(e->scheduler_->stats(), e->spec_.get());
  e->thread_ = std::thread([raw = e.get()] { raw->loop(); });
  return e;
}

EngineImpl::~EngineImpl() { shutdown(std::chrono::milliseconds(0)); }

Status EngineImpl::load_lora_adapter(const std::string& name, const std::string& path) {
  return loras_->registry().load(name, path);
}

Status EngineImpl::unload_lora_adapter(const std::string& name) { return loras_->registry().unload(name); }

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

#include "fake_engine.h"

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace tessera::testing {

class FakeEngine::Stream : public RequestStream {
 public:
  Stream(int64_t id, int32_t n) : id_(id), n_(n) {}
  int64_t request_id() const override { return id_; }
  std::optional<RequestOutput> next(std::optional<std::chrono::milliseconds> timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return !queue_.empty() || num_final_ >= n_; };
    if (timeout) {
      cv_.wait_for(lock, *timeout, ready);
    } else {
      cv_.wait(lock, ready);
    }
    if (queue_.empty()) return std::nullopt;
    RequestOutput out = std::move(queue_.front());
    queue_.pop_front();
    return out;
  }
  bool finished() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return num_final_ >= n_;
  }
  void push(RequestOutput out) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (out.finish_reason != FinishReason::kNone) num_final_ += 1;
      queue_.push_back(std::move(out));
    }
    cv_.notify_all();
  }

 private:
  const int64_t id_;
  const int32_t n_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  int32_t num_final_ = 0;
};

struct FakeEngine::Sample {
  int32_t index = 0;
  std::string text;          // full generated text (after stop cut)
  size_t num_emitted = 0;    // bytes of text already sent
  int32_t num_output = 0;
  bool finished = false;
  std::mt19937_64 rng;
};

struct FakeEngine::Req {
  int64_t id = 0;
  std::vector<int32_t> prompt;
  std::string prompt_bytes;  // prompt without specials ('#' -> EOS when greedy)
  SamplingParams params;
  std::shared_ptr<Stream> stream;
  std::vector<Sample> samples;
  int32_t num_cached = 0;
  bool crash = false;
  std::chrono::steady_clock::time_point arrival;
  int32_t num_finished = 0;
};

FakeEngine::FakeEngine(FakeEngineConfig config) : config_(std::move(config)) {
  info_.name = config_.name;
  info_.architecture = "fake";
  info_.path = "/fake/" + config_.name + ".gguf";
  info_.vocab_size = 258;
  info_.context_length = config_.context_length;
  info_.bos_id = kBos;
  info_.eos_id = kEos;
  info_.add_bos = true;
  info_.num_kv_blocks = config_.num_kv_blocks;
  info_.block_size = kBlockSize;
  step_delay_us_.store(config_.step_delay.count());
  counters_.time_to_first_token = Histogram::with_bounds({0.01, 0.1, 1.0});
  counters_.inter_token_latency = Histogram::with_bounds({0.01, 0.1, 1.0});
  counters_.e2e_request_latency = Histogram::with_bounds({0.01, 0.1, 1.0});
  counters_.request_queue_time = Histogram::with_bounds({0.01, 0.1, 1.0});
  thread_ = std::thread([this] { loop(); });
}

FakeEngine::~FakeEngine() { shutdown(std::chrono::milliseconds(0)); }

std::vector<int32_t> FakeEngine::tokenize(const std::string& text, bool add_bos, bool) const {
  std::vector<int32_t> ids;
  if (add_bos) ids.push_back(kBos);
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::string FakeEngine::detokenize(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id >= 0 && id < 256) out += static_cast<char>(id);
  }
  return out;
}

namespace {

// "<|role|>\ncontent\n" per message, tools as one "<|tools|>" line (JSON as given).
Result<std::string> render_chat(const ChatTemplateInput& input) {
  const auto messages = nlohmann::json::parse(input.messages_json, nullptr, false);
  if (messages.is_discarded() || !messages.is_array()) return make_error(ErrorCode::kInvalidArgument, "bad messages");
  std::string out;
  if (!input.tools_json.empty()) out += "<|tools|>" + input.tools_json + "\n";
  for (const auto& m : messages) {
    const std::string content = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
    if (content == "TEMPLATE_FAIL") return make_error(ErrorCode::kInvalidArgument, "template refused");
    out += "<|" + m.value("role", std::string()) + "|>\n" + content + "\n";
  }
  if (input.add_generation_prompt) out += "<|assistant|>\n";
  return out;
}

}  // namespace

Result<ChatPrompt> FakeEngine::chat_prompt(const ChatTemplateInput& input, bool add_bos) const {
  Result<std::string> text = render_chat(input);
  if (!text.ok()) return text.error();
  return ChatPrompt{*text, tokenize(*text, add_bos, /*parse_special=*/false)};
}

Result<std::shared_ptr<RequestStream>> FakeEngine::submit(GenerateRequest request) {
  if (request.prompt_ids.empty()) return make_error(ErrorCode::kInvalidArgument, "empty prompt");
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= info_.vocab_size) return make_error(ErrorCode::kInvalidArgument, "bad token {}", id);
  }
  if (static_cast<int32_t>(request.prompt_ids.size()) >= info_.context_length) {
    return make_error(ErrorCode::kOutOfRange, "prompt of {} tokens does not fit", request.prompt_ids.size());
  }
  const std::string bytes = detokenize(request.prompt_ids);
  if (bytes.find("REJECT") != std::string::npos) {
    return make_error(ErrorCode::kInvalidArgument, "prompt rejected by the fake engine");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!accepting_) return make_error(ErrorCode::kResourceExhausted, "engine is shutting down");
  if (static_cast<int32_t>(requests_.size()) >= config_.max_queue) {
    return make_error(ErrorCode::kResourceExhausted, "queue full ({} requests)", requests_.size());
  }
  auto r = std::make_unique<Req>();
  r->id = next_id_++;
  r->prompt = std::move(request.prompt_ids);
  r->prompt_bytes = bytes;
  r->params = request.params;
  r->crash = bytes.find("CRASH") != std::string::npos;
  r->arrival = std::chrono::steady_clock::now();
  r->stream = std::make_shared<Stream>(r->id, r->params.n);
  if (seen_prompts_.count(r->prompt)) {
    r->num_cached = static_cast<int32_t>((r->prompt.size() - 1) / kBlockSize * kBlockSize);
  }
  seen_prompts_.insert(r->prompt);
  const uint64_t seed = r->params.seed.value_or(0x5eed0000ull + static_cast<uint64_t>(r->id));
  for (int32_t i = 0; i < r->params.n; ++i) {
    Sample s;
    s.index = i;
    s.rng.seed(seed + 1000003ull * static_cast<uint64_t>(i));
    r->samples.push_back(std::move(s));
  }
  std::shared_ptr<RequestStream> stream = r->stream;
  waiting_.push_back(r->id);
  requests_[r->id] = std::move(r);
  num_submitted_.fetch_add(1);
  cv_.notify_all();
  return stream;
}

void FakeEngine::abort(int64_t request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  aborts_.push_back(request_id);
  cv_.notify_all();
}

int32_t FakeEngine::blocks_for(const Req& r) const {
  int32_t blocks = 0;
  for (const Sample& s : r.samples) {
    const int32_t tokens = static_cast<int32_t>(r.prompt.size()) + s.num_output;
    blocks += (tokens + kBlockSize - 1) / kBlockSize;
  }
  return blocks;
}

void FakeEngine::free_locked(Req& r) {
  if (running_.erase(r.id)) num_blocks_used_ -= blocks_for(r);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), r.id), waiting_.end());
}

void FakeEngine::finish_locked(Req& r, Sample& s, FinishReason reason, const std::string& error) {
  s.finished = true;
  r.num_finished += 1;
  RequestOutput out;
  out.sample_index = s.index;
  out.text_delta = s.text.substr(std::min(s.num_emitted, s.text.size()));
  s.num_emitted = s.text.size();
  out.finish_reason = reason;
  out.error = error;
  out.num_prompt_tokens = static_cast<int32_t>(r.prompt.size());
  out.num_cached_prompt_tokens = r.num_cached;
  out.num_output_tokens = s.num_output;
  r.stream->push(std::move(out));
}

void FakeEngine::step_locked() {
  // Aborts first (between steps, as the real engine applies them).
  for (int64_t id : aborts_) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    Req& r = *it->second;
    for (Sample& s : r.samples) {
      if (!s.finished) finish_locked(r, s, FinishReason::kAbort, "");
    }
    free_locked(r);
    counters_.num_requests_aborted += 1;
    counters_.num_requests_finished += 1;  // as the real engine counts: aborts are finished too
    num_aborted_.fetch_add(1);
    requests_.erase(it);
  }
  aborts_.clear();
  // Admit.
  while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Req& r = *requests_.at(waiting_.front());
    const int32_t need = blocks_for(r);
    if (num_blocks_used_ + need > config_.num_kv_blocks) break;
    num_blocks_used_ += need;
    running_.insert(r.id);
    waiting_.pop_front();
    counters_.prompt_tokens += static_cast<int64_t>(r.prompt.size());
    counters_.prefix_cache_queries += static_cast<int64_t>(r.prompt.size());
    counters_.prefix_cache_hits += r.num_cached;
    counters_.request_queue_time.observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - r.arrival).count());
  }
  // Decode one token for every running sample.
  std::vector<int64_t> done;
  for (int64_t id : running_) {
    Req& r = *requests_.at(id);
    for (Sample& s : r.samples) {
      if (s.finished) continue;
      const int32_t before = blocks_for(r);
      int32_t token = 'x';
      const SamplingParams& p = r.params;
      if (p.temperature == 0.0f) {
        if (!r.prompt_bytes.empty()) {
          const char c = r.prompt_bytes[static_cast<size_t>(s.num_output) % r.prompt_bytes.size()];
          token = c == '#' ? kEos : static_cast<unsigned char>(c);
        }
      } else {
        token = 'a' + static_cast<int32_t>(s.rng() % 26);
      }
      s.num_output += 1;
      num_blocks_used_ += blocks_for(r) - before;
      counters_.generation_tokens += 1;
      if (s.num_output == 1) {
        counters_.time_to_first_token.observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - r.arrival).count());
      } else {
        counters_.inter_token_latency.observe(0.001);
      }
      RequestOutput out;
      out.sample_index = s.index;
      out.token_ids = {token};
      if (p.logprobs) {
        out.logprobs = {TokenLogprob{token, -0.5f}};
        std::vector<TokenLogprob> top;
        for (int32_t j = 0; j < *p.logprobs; ++j) top.push_back({(token + j) % 256, -0.5f - static_cast<float>(j)});
        out.top_logprobs = {top};
      }
      out.num_prompt_tokens = static_cast<int32_t>(r.prompt.size());
      out.num_cached_prompt_tokens = r.num_cached;
      out.num_output_tokens = s.num_output;
      FinishReason finish = FinishReason::kNone;
      if (token == kEos && !p.ignore_eos && s.num_output > p.min_tokens) {
        finish = FinishReason::kStop;
      } else if (token < 256) {
        s.text += static_cast<char>(token);
        size_t hold = 0;
        for (const std::string& stop : p.stop) {
          const size_t at = s.text.find(stop, s.num_emitted >= stop.size() ? s.num_emitted - stop.size() : 0);
          if (at != std::string::npos) {
            s.text.resize(p.include_stop_str_in_output ? at + stop.size() : at);
            finish = FinishReason::kStop;
            break;
          }
          for (size_t k = std::min(stop.size() - 1, s.text.size()); k > 0; --k) {
            if (s.text.compare(s.text.size() - k, k, stop, 0, k) == 0) {
              hold = std::max(hold, k);
              break;
            }
          }
        }
        if (finish == FinishReason::kNone) {
          const size_t emit_to = s.text.size() - hold;
          if (emit_to > s.num_emitted) {
            out.text_delta = s.text.substr(s.num_emitted, emit_to - s.num_emitted);
            s.num_emitted = emit_to;
          }
        }
      }
      if (finish == FinishReason::kNone && s.num_output >= p.max_tokens) finish = FinishReason::kLength;
      if (r.crash && s.num_output >= 3) {
        r.stream->push(std::move(out));
        finish_locked(r, s, FinishReason::kError, "injected failure (CRASH)");
        continue;
      }
      if (finish != FinishReason::kNone) {
        out.finish_reason = finish;
        out.text_delta += s.text.substr(std::min(s.num_emitted, s.text.size()));
        s.num_emitted = s.text.size();
        s.finished = true;
        r.num_finished += 1;
      }
      r.stream->push(std::move(out));
    }
    if (r.num_finished == r.params.n) done.push_back(id);
  }
  for (int64_t id : done) {
    Req& r = *requests_.at(id);
    counters_.e2e_request_latency.observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - r.arrival).count());
    counters_.num_requests_finished += 1;
    free_locked(r);
    requests_.erase(id);
  }
  counters_.num_steps += 1;
}

void FakeEngine::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait(lock, [&] { return stop_ || !requests_.empty() || !aborts_.empty(); });
    if (stop_) break;
    step_locked();
    const auto delay = std::chrono::microseconds(step_delay_us_.load());
    lock.unlock();
    std::this_thread::sleep_for(delay);
    lock.lock();
  }
}

MetricsSnapshot FakeEngine::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  MetricsSnapshot m = counters_;
  m.num_requests_running = static_cast<int32_t>(running_.size());
  m.num_requests_waiting = static_cast<int32_t>(waiting_.size());
  m.num_kv_blocks_total = config_.num_kv_blocks;
  m.num_kv_blocks_free = config_.num_kv_blocks - num_blocks_used_;
  m.kv_cache_usage = static_cast<double>(num_blocks_used_) / config_.num_kv_blocks;
  return m;
}

int32_t FakeEngine::num_unfinished_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int32_t>(requests_.size());
}

int32_t FakeEngine::num_blocks_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_blocks_used_;
}

void FakeEngine::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    accepting_ = false;
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (num_unfinished_requests() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, r] : requests_) aborts_.push_back(id);
    step_locked();  // applies the aborts: every stream gets its final event
    stop_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

}  // namespace tessera::testing

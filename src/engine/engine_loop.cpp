// EngineImpl: submission and its validation, abort, shutdown, the engine thread's loop, and the
// ends of requests (finished, aborted, failed).
#include <algorithm>

#include "engine/engine_impl.h"
#include "kv/block_hash.h"
#include "sample/sampler.h"
#include "util/log.h"

namespace tessera {

namespace {

constexpr int32_t kMaxSamplesPerRequest = defaults::kMaxSamplesPerRequest;
constexpr int32_t kMaxQueuedRequests = 4096;
constexpr uint64_t kSampleSeedStride = 0x9E3779B97F4A7C15ull;  // decorrelates the n samples' streams

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

Result<std::shared_ptr<RequestStream>> EngineImpl::submit(GenerateRequest request) {
  std::vector<GenerateRequest> one;
  one.push_back(std::move(request));
  auto streams = submit_all(std::move(one));
  if (!streams.ok()) return streams.error();
  return std::move(streams.value().front());
}

Result<std::vector<std::shared_ptr<RequestStream>>> EngineImpl::submit_all(std::vector<GenerateRequest> requests) {
  std::vector<EngineMessage> msgs;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (GenerateRequest& request : requests) {
    auto msg = make_add_message(std::move(request), static_cast<int64_t>(msgs.size()));
    if (!msg.ok()) return msg.error();
    streams.push_back(msg.value().request->stream);
    msgs.push_back(std::move(msg.value()));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (EngineMessage& m : msgs) {
      messages_.push_back(std::move(m));
      num_unfinished_.fetch_add(1);
    }
  }
  cv_.notify_all();
  return streams;
}

Result<EngineMessage> EngineImpl::make_add_message(GenerateRequest request, int64_t num_before) {
  if (!accepting_.load()) {
    return make_error(ErrorCode::kResourceExhausted, "the engine is shutting down");
  }
  const SamplingParams& p = request.params;
  const auto num_prompt = static_cast<int64_t>(request.prompt_ids.size());
  if (num_prompt == 0) return make_error(ErrorCode::kInvalidArgument, "the prompt is empty");
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= info_.vocab_size) {
      return make_error(ErrorCode::kInvalidArgument, "prompt token id {} is outside the vocabulary [0, {})",
                        id, info_.vocab_size);
    }
  }
  if (p.n < 1 || p.n > kMaxSamplesPerRequest) {
    return make_error(ErrorCode::kInvalidArgument, "n must be in [1, {}], got {}", kMaxSamplesPerRequest, p.n);
  }
  if (p.max_tokens < 1) {
    return make_error(ErrorCode::kInvalidArgument, "max_tokens must be at least 1, got {}", p.max_tokens);
  }
  TESSERA_TRY(sample::validate_sampling_params(p, info_.vocab_size));
  if (num_prompt >= info_.context_length) {
    return make_error(ErrorCode::kOutOfRange,
                      "the prompt has {} tokens, but this model's context is {} tokens", num_prompt,
                      info_.context_length);
  }
  if (num_prompt + p.max_tokens > info_.context_length) {
    return make_error(ErrorCode::kOutOfRange,
                      "this model's maximum context length is {} tokens, but {} were requested ({} in the "
                      "prompt, {} to generate)",
                      info_.context_length, num_prompt + p.max_tokens, num_prompt, p.max_tokens);
  }
  // The scheduler's own rule (its config is fixed at create: safe to read from this thread).
  const int64_t blocks_needed = sched::max_kv_blocks_of_request(num_prompt, p.max_tokens, scheduler_->kv_block_rule());
  if (blocks_needed > info_.num_kv_blocks) {
    return make_error(ErrorCode::kOutOfRange,
                      "the request needs {} KV blocks ({} tokens to cache) but the whole cache has {}; raise "
                      "the KV budget or lower max_tokens",
                      blocks_needed, num_prompt + p.max_tokens - 1, info_.num_kv_blocks);
  }
  if (num_unfinished_.load() + num_before >= kMaxQueuedRequests) {
    return make_error(ErrorCode::kResourceExhausted, "too many requests in flight ({}); retry later",
                      kMaxQueuedRequests);
  }

  auto req = std::make_unique<ActiveRequest>();
  req->id = next_request_id_.fetch_add(1);
  req->params = p;
  req->prompt = std::make_shared<const std::vector<int32_t>>(std::move(request.prompt_ids));  // moved, not copied
  req->arrival = Clock::now();
  req->stream = std::make_shared<RequestStreamImpl>(req->id, p.n);
  const uint64_t base_seed = p.seed.has_value() ? *p.seed : config_.seed * 1000003ull + static_cast<uint64_t>(req->id);
  req->samples.resize(static_cast<size_t>(p.n));
  for (int32_t i = 0; i < p.n; ++i) {
    SampleState& s = req->samples[static_cast<size_t>(i)];
    s.rng = sample::Rng(base_seed + static_cast<uint64_t>(i) * kSampleSeedStride);
    s.output = std::make_unique<OutputProcessor>(*tokenizer_, p.stop, p.include_stop_str_in_output);
  }
  for (SampleState& s : req->samples) req->rng_ptrs.push_back(&s.rng);
  if (!request.lora_name.empty()) {
    req->lora = loras_->registry().find(request.lora_name);
    if (!req->lora) return make_error(ErrorCode::kNotFound, "no LoRA adapter named '{}' is loaded", request.lora_name);
  }
  auto grammar = structured_->compile(p.structured);  // compiled here (cached), off the engine thread
  if (!grammar.ok()) return grammar.error();
  req->grammar = std::move(grammar.value());
  EngineMessage msg;
  msg.kind = EngineMessage::Kind::kAdd;
  msg.request_id = req->id;
  msg.cache_salt = lora_cache_salt(request.cache_salt, req->lora.get());  // blocks keyed by adapter too
  msg.request = std::move(req);
  return msg;
}

void EngineImpl::abort(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    EngineMessage msg;
    msg.kind = EngineMessage::Kind::kAbort;
    msg.request_id = request_id;
    messages_.push_back(std::move(msg));
  }
  cv_.notify_all();
}

void EngineImpl::shutdown(std::chrono::milliseconds grace) {
  accepting_.store(false);
  const auto deadline = Clock::now() + grace;
  while (num_unfinished_.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineImpl::drain_messages() {
  std::deque<EngineMessage> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(messages_);
  }
  // Requests held back by max_loras first (their adapter may have a place now), in arrival order.
  loras_->retry_held([&](EngineMessage& m) { return admit(m); });
  for (EngineMessage& msg : batch) {
    if (msg.kind == EngineMessage::Kind::kAdd) {
      msg.request->cache_extra_key = kv::hash_cache_salt(msg.cache_salt);  // the draft's prefix cache too
      if (disk_ && disk_->park(msg, *scheduler_)) continue;  // admitted once its blocks are read from disk
      if (!admit(msg)) loras_->hold(std::move(msg));
    } else {
      if (std::unique_ptr<ActiveRequest> parked = disk_ ? disk_->take_parked(msg.request_id) : nullptr) {
        end_unfinished_samples(*parked, FinishReason::kAbort, "");
        metrics_->live().num_requests_aborted += 1;
        num_unfinished_.fetch_sub(1);
        continue;
      }
      if (std::unique_ptr<ActiveRequest> held = loras_->take_held(msg.request_id)) {  // aborted before admission
        end_unfinished_samples(*held, FinishReason::kAbort, "");
        metrics_->live().num_requests_aborted += 1;
        num_unfinished_.fetch_sub(1);
        continue;
      }
      auto it = requests_.find(msg.request_id);
      if (it == requests_.end()) continue;
      scheduler_->abort_request(msg.request_id);
      end_unfinished_samples(*it->second, FinishReason::kAbort, "");
      metrics_->live().num_requests_aborted += 1;
      finish_request_state(*it->second);
      requests_.erase(it);
    }
  }
  // An abort can leave nothing to step: publish now, or metrics() would keep the pre-abort state.
  if (!batch.empty()) {
    loras_->count(requests_, metrics_->live().lora_requests);
    metrics_->publish(scheduler_->stats(), spec_.get());
  }
}

bool EngineImpl::admit(EngineMessage& msg) {
  ActiveRequest& req = *msg.request;
  if (!loras_->has_room(req, requests_)) return false;  // max_loras
  req.cache_extra_key = kv::hash_cache_salt(msg.cache_salt);  // the draft's prefix cache too
  if (config_.on_kv_events) loras_->note_admitted(req, kv_->num_groups());
  Status added = scheduler_->add_request(scheduler_request_of(req, eos_ids_, std::move(msg.cache_salt)));
  if (!added.ok()) {
    for (int32_t i = 0; i < req.params.n; ++i) {
      RequestOutput out;
      out.sample_index = i;
      out.finish_reason = FinishReason::kError;
      out.error = added.error().message;
      out.num_prompt_tokens = static_cast<int32_t>(req.prompt->size());
      req.stream->push(std::move(out));
    }
    num_unfinished_.fetch_sub(1);
    return true;
  }
  metrics_->live().prompt_tokens += static_cast<int64_t>(req.prompt->size());
  if (disk_) disk_->note_prompt(req.id, static_cast<int32_t>(req.prompt->size()));
  structured_->add(req.id, req.grammar, req.params.n);
  requests_.emplace(req.id, std::move(msg.request));
  return true;
}

void EngineImpl::end_unfinished_samples(ActiveRequest& req, FinishReason reason, const std::string& error) {
  for (size_t i = 0; i < req.samples.size(); ++i) {
    SampleState& s = req.samples[i];
    if (s.finished) continue;
    s.finished = true;
    RequestOutput out;
    out.sample_index = static_cast<int32_t>(i);
    out.finish_reason = reason;
    out.error = error;
    out.num_prompt_tokens = static_cast<int32_t>(req.prompt->size());
    out.num_cached_prompt_tokens = req.num_cached_prompt_tokens;
    out.num_output_tokens = static_cast<int32_t>(s.output_ids.size());
    req.stream->push(std::move(out));
  }
}

void EngineImpl::finish_request_state(ActiveRequest& req) {
  structured_->remove(req.id);
  metrics_->live().e2e_request_latency.observe(seconds_between(req.arrival, Clock::now()));
  metrics_->live().num_requests_finished += 1;
  num_unfinished_.fetch_sub(1);
}

void EngineImpl::fail_nonfinite_requests(const sched::SchedulerOutput& out, const RunnerOutput& result) {
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    if (result.nonfinite_logits[i] == 0) continue;
    const sched::ScheduledSeq& s = out.seqs[i];
    if (spec_) spec_->remove(s.seq_id);
    auto it = requests_.find(s.request_id);
    if (it == requests_.end()) continue;  // another sample of it already failed this step
    scheduler_->abort_request(s.request_id, sched::RequestStatus::kFinishedError);
    ActiveRequest& req = *it->second;
    end_unfinished_samples(req, FinishReason::kError,
                           "the model produced non-finite logits (NaN or Inf) for this request");
    metrics_->live().num_requests_nonfinite += 1;
    finish_request_state(req);
    requests_.erase(it);
  }
}

void EngineImpl::loop() {
  while (true) {
    drain_messages();
    if (stop_.load()) break;
    if (disk_ && disk_->has_parked()) {  // requests whose blocks came back from disk
      for (EngineMessage& msg : disk_->ready(*scheduler_, *kv_)) {
        if (!admit(msg)) loras_->hold(std::move(msg));
      }
    }
    if (!scheduler_->has_unfinished_requests()) {
      if (disk_) disk_->end_all();  // every sequence has ended: its held-back blocks go to disk
      // Writes finishing after the last step: their DISK events go out while idle, not with the
      // next request's first step.
      const bool poll_disk_events = disk_ && config_.on_kv_events && disk_->events_pending();
      {
        std::unique_lock<std::mutex> lock(mutex_);
        const auto woken = [&] { return !messages_.empty() || stop_.load(); };
        if (disk_ && disk_->has_parked()) {  // reads in flight: poll them (a block reads in ~100 us)
          cv_.wait_for(lock, std::chrono::microseconds(200), woken);
        } else if (poll_disk_events) {
          cv_.wait_for(lock, std::chrono::milliseconds(5), woken);
        } else {
          cv_.wait(lock, woken);
        }
      }
      if (poll_disk_events) publish();
      continue;
    }
    step();
  }
  // Shutting down: whatever is still in flight is aborted, and its client told so.
  if (disk_) {
    for (int64_t id : disk_->parked_ids()) {
      std::unique_ptr<ActiveRequest> req = disk_->take_parked(id);
      end_unfinished_samples(*req, FinishReason::kAbort, "");
      num_unfinished_.fetch_sub(1);
    }
  }
  for (auto& [id, req] : requests_) {
    scheduler_->abort_request(id);
    for (size_t i = 0; i < req->samples.size(); ++i) {
      if (req->samples[i].finished) continue;
      RequestOutput out;
      out.sample_index = static_cast<int32_t>(i);
      out.finish_reason = FinishReason::kAbort;
      req->stream->push(std::move(out));
    }
    num_unfinished_.fetch_sub(1);
  }
  requests_.clear();
  for (std::unique_ptr<ActiveRequest>& req : loras_->take_all_held()) {
    end_unfinished_samples(*req, FinishReason::kAbort, "");
    num_unfinished_.fetch_sub(1);
  }
  metrics_->publish(scheduler_->stats(), spec_.get());
}

}  // namespace tessera

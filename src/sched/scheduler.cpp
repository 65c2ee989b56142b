#include "sched/scheduler.h"

#include <algorithm>

#include "util/check.h"

namespace tessera::sched {

Status validate_scheduler_config(const SchedulerConfig& c) {
  if (c.max_num_seqs <= 0 || c.max_num_batched_tokens <= 0 || c.max_model_len <= 0 ||
      c.block_size <= 0 || c.num_blocks < 2 || c.long_prefill_token_threshold < 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "scheduler config: max_num_seqs {}, max_num_batched_tokens {}, max_model_len "
                      "{}, block_size {} must be > 0 and num_blocks {} >= 2",
                      c.max_num_seqs, c.max_num_batched_tokens, c.max_model_len, c.block_size,
                      c.num_blocks);
  }
  if (!c.enable_chunked_prefill && c.max_num_batched_tokens < c.max_model_len) {
    return make_error(ErrorCode::kInvalidArgument,
                      "without chunked prefill max_num_batched_tokens ({}) must be >= "
                      "max_model_len ({}), or a long prompt could never be scheduled",
                      c.max_num_batched_tokens, c.max_model_len);
  }
  return ok_status();
}

namespace {
kv::KvCacheConfig kv_cache_config_of(const SchedulerConfig& c) {
  kv::KvCacheConfig k{c.num_blocks, c.block_size, c.enable_prefix_caching, c.record_block_events, {}};
  for (int32_t w : c.kv_group_windows) k.groups.push_back({.sliding_window = w});
  return k;
}
}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config) : config_(config), kv_(kv_cache_config_of(config)) {
  const Status status = validate_scheduler_config(config);
  TESSERA_CHECK(status.ok(), "{}", status.ok() ? "" : status.error().message);
}

kv::SeqTokens Scheduler::view(const Request& r) const {
  return {r.id, r.tokens(), r.block_hashes, r.cache_extra_key};
}

Status Scheduler::add_request(NewRequest in) {
  if (in.id < 0 || in.id >= (int64_t{1} << 62)) {
    return make_error(ErrorCode::kInvalidArgument, "request id {} out of range", in.id);
  }
  if (requests_.count(in.id) != 0) {
    return make_error(ErrorCode::kInvalidArgument, "request id {} is already live", in.id);
  }
  if (!in.prompt || in.prompt->empty()) {
    return make_error(ErrorCode::kInvalidArgument, "request {}: empty prompt", in.id);
  }
  if (in.num_samples < 1 || in.num_samples > config_.max_num_seqs) {
    return make_error(ErrorCode::kInvalidArgument, "request {}: n = {} must be in [1, {}]", in.id,
                      in.num_samples, config_.max_num_seqs);
  }
  if (in.stop.max_tokens < 1 || in.stop.min_tokens < 0 || in.stop.min_tokens > in.stop.max_tokens) {
    return make_error(ErrorCode::kInvalidArgument, "request {}: max_tokens {}, min_tokens {}",
                      in.id, in.stop.max_tokens, in.stop.min_tokens);
  }
  const int64_t num_prompt = static_cast<int64_t>(in.prompt->size());
  const int64_t total = num_prompt + in.stop.max_tokens;
  if (total > config_.max_model_len) {
    return make_error(ErrorCode::kOutOfRange,
                      "request {}: {} prompt tokens + {} max_tokens = {} exceed the model's "
                      "maximum context length {}",
                      in.id, num_prompt, in.stop.max_tokens, total, config_.max_model_len);
  }
  const int64_t num_blocks = max_kv_blocks_of_request(num_prompt, in.stop.max_tokens, kv_block_rule());
  if (num_blocks > kv_.num_usable_blocks()) {
    return make_error(ErrorCode::kOutOfRange,
                      "request {}: {} tokens need {} KV blocks of {} tokens, the cache has {}",
                      in.id, total, num_blocks, config_.block_size, kv_.num_usable_blocks());
  }
  Request r;
  r.id = in.id;
  r.parent_id = in.id;
  r.num_samples = in.num_samples;
  r.prompt = std::move(in.prompt);
  r.stop = std::move(in.stop);
  r.arrival_index = next_arrival_index_++;
  r.cache_extra_key = kv::hash_cache_salt(in.cache_salt);
  kv::extend_block_hashes(r.block_hashes, r.tokens(), config_.block_size, r.cache_extra_key);
  waiting_.push_back(r.id);
  requests_.emplace(r.id, std::move(r));
  return ok_status();
}

std::optional<int32_t> Scheduler::try_schedule(Request& r, int32_t budget, SchedulerOutput& out) {
  kv::PrefixHit hit;
  const kv::PrefixHit* hit_ptr = nullptr;
  int32_t num_computed = r.num_computed_tokens;
  if (!kv_.contains(r.id)) {  // first allocation since (re)admission: look for a cached prefix
    TESSERA_CHECK(num_computed == 0, "sequence {} has computed tokens but no blocks", r.id);
    hit = kv_.get_computed_blocks(view(r));
    hit_ptr = &hit;
    num_computed = hit.num_tokens;
  }
  const int32_t num_known_left = r.num_tokens() - num_computed;
  int32_t num_new = r.num_tokens_with_spec() - num_computed;
  // Drafts past the last position this sequence can ever need are pointless.
  const int32_t last_position = std::min(r.num_prompt_tokens() + r.stop.max_tokens - 1,
                                         config_.max_model_len);
  num_new = std::min(num_new, std::max(num_known_left, last_position - num_computed));
  if (config_.long_prefill_token_threshold > 0) {
    num_new = std::min(num_new, config_.long_prefill_token_threshold);
  }
  if (!config_.enable_chunked_prefill && num_known_left > budget) return 0;
  num_new = std::min(num_new, budget);
  if (num_new <= 0) return 0;
  auto alloc = kv_.allocate_slots(r.id, num_computed, num_new, hit_ptr);
  if (!alloc) return std::nullopt;
  r.num_computed_tokens = num_computed;
  r.status = RequestStatus::kRunning;

  ScheduledSeq s;
  s.seq_id = r.id;
  s.request_id = r.parent_id;
  s.sample_index = r.sample_index;
  s.start_position = num_computed;
  // The step's chunk: a copy of positions [num_computed, num_computed + num_new) of prompt ++
  // output ++ drafts (the runner's batch input; the request keeps its one prompt).
  const kv::TokenRun known = r.tokens();
  s.token_ids.reserve(static_cast<size_t>(num_new));
  for (int32_t p = num_computed; p < num_computed + num_new; ++p) {
    s.token_ids.push_back(p < r.num_tokens() ? known[static_cast<size_t>(p)]
                                             : r.spec_token_ids[static_cast<size_t>(p - r.num_tokens())]);
  }
  s.block_table.clear();  // every group's table, group after group (all the same length)
  for (int32_t g = 0; g < kv_.num_groups(); ++g) {
    auto table = kv_.block_table(r.id, g);
    s.block_table.insert(s.block_table.end(), table.begin(), table.end());
  }
  s.num_spec_tokens = std::max(0, num_computed + num_new - r.num_tokens());
  s.needs_logits = num_computed + num_new >= r.num_tokens();
  s.num_samples = s.needs_logits && r.num_samples > 1 ? r.num_samples : 1;
  s.is_new = hit_ptr != nullptr;
  out.cow_copies.insert(out.cow_copies.end(), alloc->cow_copies.begin(), alloc->cow_copies.end());
  out.num_scheduled_tokens += num_new;
  out.seqs.push_back(std::move(s));
  return num_new;
}

void Scheduler::add_prompt_blocks_in_flight(const Request& r, std::unordered_set<kv::BlockHash>& in_flight) const {
  // Blocks below num_computed_tokens are in the cache already (entered after the step that computed
  // them); the prompt's later full blocks will be, as r's prefill reaches them.
  const auto first = static_cast<size_t>(r.num_computed_tokens / config_.block_size);
  const size_t end = std::min(r.block_hashes.size(), static_cast<size_t>(r.num_prompt_tokens() / config_.block_size));
  for (size_t b = first; b < end; ++b) in_flight.insert(r.block_hashes[b]);
}

bool Scheduler::waits_for_block_in_flight(const Request& r, const std::unordered_set<kv::BlockHash>& in_flight) const {
  // A chained hash names its whole prefix: if any block of r is in flight, r's first block missing
  // from the cache is too (the computing sequence holds the same prefix, cached up to its progress).
  if (in_flight.empty()) return false;
  const size_t end = std::min(r.block_hashes.size(), static_cast<size_t>(r.num_prompt_tokens() / config_.block_size));
  for (size_t b = 0; b < end; ++b) {
    if (in_flight.contains(r.block_hashes[b])) return true;
  }
  return false;
}

void Scheduler::preempt(int64_t seq_id, SchedulerOutput& out) {
  Request& r = requests_.at(seq_id);
  kv_.free(seq_id);
  r.status = RequestStatus::kPreempted;
  r.num_computed_tokens = 0;
  r.spec_token_ids.clear();
  ++r.num_preemptions;
  ++num_preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), seq_id));
  waiting_.push_front(seq_id);
  out.preempted_ids.push_back(seq_id);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  out.finished_ids = std::move(finished_pending_);
  finished_pending_.clear();
  int32_t budget = config_.max_num_batched_tokens;
  const bool is_static = config_.policy == SchedulerPolicy::kStatic;

  if (is_static && running_.empty()) {  // form the next fixed batch
    static_batch_size_ = 0;
    while (!waiting_.empty()) {
      Request& r = requests_.at(waiting_.front());
      if (static_batch_size_ + r.num_samples > config_.max_num_seqs) break;
      static_batch_size_ += r.num_samples;
      r.status = RequestStatus::kRunning;
      running_.push_back(r.id);
      waiting_.pop_front();
    }
  }

  // Running sequences, oldest first; preempt from the newest end when the cache is full.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request& r = requests_.at(running_[i]);
    const std::optional<int32_t> num = try_schedule(r, budget, out);
    if (num) {
      budget -= *num;
      ++i;
      continue;
    }
    const int64_t victim = running_.back();
    preempt(victim, out);
    if (victim == r.id) break;  // it was the newest: it waits for blocks like everyone else
  }

  // Waiting sequences, FCFS, unless this step had to preempt. One whose next uncached prompt block
  // a running sequence is computing (the same system prompt, sent by two clients at once) keeps its
  // place and lets the ones behind it in: admitted now it would compute that prefix a second time;
  // a few steps later it finds it in the prefix cache.
  if (!is_static && out.preempted_ids.empty()) {
    int32_t num_lanes = 0;  // running sequences plus samples they will fork
    for (int64_t id : running_) num_lanes += requests_.at(id).num_samples;
    std::unordered_set<kv::BlockHash> in_flight;
    if (config_.enable_prefix_caching) {
      for (int64_t id : running_) add_prompt_blocks_in_flight(requests_.at(id), in_flight);
    }
    for (size_t w = 0; w < waiting_.size() && budget > 0;) {
      Request& r = requests_.at(waiting_[w]);
      if (num_lanes + r.num_samples > config_.max_num_seqs) break;
      if (waits_for_block_in_flight(r, in_flight)) {
        ++num_prefix_waits_;
        ++w;
        continue;
      }
      const std::optional<int32_t> num = try_schedule(r, budget, out);
      if (!num || *num == 0) break;
      budget -= *num;
      num_lanes += r.num_samples;
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
      running_.push_back(r.id);
      if (config_.enable_prefix_caching) add_prompt_blocks_in_flight(r, in_flight);
    }
  }

  if (is_static) {
    out.num_idle_lanes = std::max(0, static_batch_size_ - num_running());
    num_idle_lane_steps_ += out.num_idle_lanes;
  }
  if (!out.seqs.empty()) ++num_steps_;
  num_scheduled_tokens_ += out.num_scheduled_tokens;
  TESSERA_CHECK(out.num_scheduled_tokens <= config_.max_num_batched_tokens, "budget overrun {}",
                out.num_scheduled_tokens);
  if (config_.check_integrity_every_step) check_integrity();
  return out;
}

std::vector<int32_t> Scheduler::append_tokens(Request& r, std::span<const int32_t> tokens) {
  std::vector<int32_t> appended;
  const auto contains = [](const std::vector<int32_t>& ids, int32_t t) {
    return std::find(ids.begin(), ids.end(), t) != ids.end();
  };
  for (int32_t t : tokens) {
    r.append_token(t, config_.block_size);
    appended.push_back(t);
    const bool past_min = r.num_output_tokens() >= r.stop.min_tokens;
    if (past_min && ((!r.stop.ignore_eos && contains(r.stop.eos_token_ids, t)) ||
                     contains(r.stop.stop_token_ids, t))) {
      r.status = RequestStatus::kFinishedStopped;
    } else if (r.num_output_tokens() >= r.stop.max_tokens ||
               r.num_tokens() >= config_.max_model_len) {
      r.status = RequestStatus::kFinishedLength;
    }
    if (is_finished(r.status)) break;
  }
  return appended;
}

void Scheduler::remove_from_queues(int64_t seq_id) {
  auto it = std::find(running_.begin(), running_.end(), seq_id);
  if (it != running_.end()) running_.erase(it);
  auto wit = std::find(waiting_.begin(), waiting_.end(), seq_id);
  if (wit != waiting_.end()) waiting_.erase(wit);
}

void Scheduler::finish(Request& r, RequestStatus status) {
  TESSERA_CHECK(is_finished(status), "finish with status {}", request_status_name(status));
  const int64_t id = r.id;
  r.status = status;
  kv_.free(id);
  remove_from_queues(id);
  finished_pending_.push_back(id);
  ++num_finished_;
  requests_.erase(id);  // r dangles from here on
}

void Scheduler::fork_samples(Request& root, std::span<const int32_t> first_tokens,
                             std::vector<RequestUpdate>& updates) {
  std::vector<int64_t> children;
  for (size_t k = 1; k < first_tokens.size(); ++k) {
    Request child = root;  // the shared prompt, hashes, computed tokens; not yet the root's first token
    child.id = next_child_id_++;
    child.sample_index = static_cast<int32_t>(k);
    child.num_samples = 1;
    kv_.fork(root.id, child.id);
    running_.push_back(child.id);
    children.push_back(child.id);
    requests_.emplace(child.id, std::move(child));
  }
  root.num_samples = 1;
  for (size_t k = 1; k < first_tokens.size(); ++k) {
    Request& child = requests_.at(children[k - 1]);
    RequestUpdate u{child.id, child.parent_id, child.sample_index,
                    append_tokens(child, first_tokens.subspan(k, 1)), child.status};
    updates.push_back(std::move(u));
    if (is_finished(child.status)) finish(child, child.status);
  }
}

std::vector<RequestUpdate> Scheduler::update_from_output(const SchedulerOutput& output,
                                                         const ModelRunnerOutput& runner_output) {
  TESSERA_CHECK(runner_output.sampled_token_ids.size() == output.seqs.size(),
                "runner answered {} sequences, {} were scheduled",
                runner_output.sampled_token_ids.size(), output.seqs.size());
  std::vector<RequestUpdate> updates;
  for (size_t i = 0; i < output.seqs.size(); ++i) {
    const ScheduledSeq& s = output.seqs[i];
    const std::vector<int32_t>& sampled = runner_output.sampled_token_ids[i];
    auto it = requests_.find(s.seq_id);
    if (it == requests_.end() || it->second.status != RequestStatus::kRunning) continue;  // aborted
    Request& r = it->second;
    TESSERA_CHECK(r.num_computed_tokens == s.start_position, "sequence {} at {}, scheduled at {}",
                  r.id, r.num_computed_tokens, s.start_position);
    int32_t num_rejected = 0;
    if (s.needs_logits) {
      const size_t expected_max = static_cast<size_t>(std::max(s.num_samples, s.num_spec_tokens + 1));
      TESSERA_CHECK(!sampled.empty() && sampled.size() <= expected_max,
                    "sequence {}: {} sampled tokens, expected 1..{}", r.id, sampled.size(),
                    expected_max);
      if (s.num_samples > 1) {
        TESSERA_CHECK(sampled.size() == static_cast<size_t>(s.num_samples),
                      "sequence {}: {} samples drawn, {} expected", r.id, sampled.size(),
                      s.num_samples);
      }
      if (s.num_spec_tokens > 0) {
        num_rejected = s.num_spec_tokens + 1 - static_cast<int32_t>(sampled.size());
      }
    } else {
      TESSERA_CHECK(sampled.empty(), "sequence {} sampled without logits", r.id);
    }
    r.num_computed_tokens += static_cast<int32_t>(s.token_ids.size()) - num_rejected;
    r.spec_token_ids.clear();
    if (num_rejected > 0) kv_.truncate(r.id, r.num_computed_tokens);
    if (!s.needs_logits) {
      kv_.cache_blocks(view(r), r.num_computed_tokens);
      continue;
    }
    std::span<const int32_t> tokens(sampled);
    if (s.num_samples > 1) {
      kv_.cache_blocks(view(r), r.num_computed_tokens);  // the prompt, before the children share it
      fork_samples(r, tokens, updates);
      tokens = tokens.first(1);
    }
    RequestUpdate u{r.id, r.parent_id, r.sample_index, append_tokens(r, tokens), r.status};
    kv_.cache_blocks(view(r), r.num_computed_tokens);
    updates.push_back(std::move(u));
    if (is_finished(r.status)) finish(r, r.status);
  }
  if (config_.check_integrity_every_step) check_integrity();
  return updates;
}

std::vector<int32_t> Scheduler::import_blocks(const kv::SeqTokens& seq, std::span<const kv::ImportBlock> blocks) {
  std::vector<int32_t> ids = kv_.import_blocks(seq, blocks);
  if (config_.check_integrity_every_step) check_integrity();
  return ids;
}

bool Scheduler::abort_request(int64_t id, RequestStatus status) {
  TESSERA_CHECK(is_finished(status), "abort_request needs a finished status");
  std::vector<int64_t> matched;
  for (const auto& [seq_id, r] : requests_) {
    if (seq_id == id || r.parent_id == id) matched.push_back(seq_id);
  }
  std::sort(matched.begin(), matched.end());
  for (int64_t seq_id : matched) finish(requests_.at(seq_id), status);
  return !matched.empty();
}

bool Scheduler::finish_request(int64_t seq_id, RequestStatus status) {
  auto it = requests_.find(seq_id);
  if (it == requests_.end() || !is_finished(status)) return false;
  finish(it->second, status);
  return true;
}

bool Scheduler::set_spec_token_ids(int64_t seq_id, std::vector<int32_t> spec_token_ids) {
  auto it = requests_.find(seq_id);
  if (it == requests_.end() || it->second.status != RequestStatus::kRunning) return false;
  if (it->second.num_samples > 1) return false;  // n samples are drawn before any speculation
  it->second.spec_token_ids = std::move(spec_token_ids);
  return true;
}

std::optional<Request> Scheduler::find_request(int64_t seq_id) const {
  auto it = requests_.find(seq_id);
  if (it == requests_.end()) return std::nullopt;
  return it->second;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running = num_running();
  s.num_waiting = num_waiting();
  for (int64_t id : waiting_) {
    const Request& r = requests_.at(id);
    s.num_waiting_uncached_tokens += std::max(0, r.num_tokens() - r.num_computed_tokens);
  }
  s.kv = kv_.stats();
  s.num_preemptions = num_preemptions_;
  s.num_prefix_waits = num_prefix_waits_;
  s.num_steps = num_steps_;
  s.num_scheduled_tokens = num_scheduled_tokens_;
  s.num_idle_lane_steps = num_idle_lane_steps_;
  s.num_finished = num_finished_;
  return s;
}

void Scheduler::check_integrity() const {
  kv_.check_integrity();
  TESSERA_CHECK(running_.size() + waiting_.size() == requests_.size(),
                "{} running + {} waiting != {} live", running_.size(), waiting_.size(),
                requests_.size());
  int32_t num_with_blocks = 0;
  for (int64_t id : running_) {
    const Request& r = requests_.at(id);
    TESSERA_CHECK(r.status == RequestStatus::kRunning, "running {} has status {}", id,
                  request_status_name(r.status));
    if (kv_.contains(id)) {
      ++num_with_blocks;
      TESSERA_CHECK(static_cast<int32_t>(kv_.block_table(id).size()) >=
                        kv_.num_blocks_for_tokens(r.num_computed_tokens),
                    "sequence {} computed {} tokens in {} blocks", id, r.num_computed_tokens,
                    kv_.block_table(id).size());
    } else {
      TESSERA_CHECK(r.num_computed_tokens == 0, "sequence {} computed without blocks", id);
    }
  }
  for (int64_t id : waiting_) {
    const Request& r = requests_.at(id);
    TESSERA_CHECK(!kv_.contains(id), "waiting sequence {} holds blocks", id);
    TESSERA_CHECK(r.status == RequestStatus::kWaiting || r.status == RequestStatus::kPreempted,
                  "waiting {} has status {}", id, request_status_name(r.status));
    TESSERA_CHECK(r.num_computed_tokens == 0, "waiting {} has computed tokens", id);
  }
  TESSERA_CHECK(num_with_blocks == kv_.num_sequences(), "{} block tables for {} sequences",
                kv_.num_sequences(), num_with_blocks);
  TESSERA_CHECK(static_cast<int32_t>(running_.size()) <= config_.max_num_seqs,
                "{} running > max_num_seqs {}", running_.size(), config_.max_num_seqs);
}

}  // namespace tessera::sched

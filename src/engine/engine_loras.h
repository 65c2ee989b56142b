// EngineLoras: the engine's side of LoRA serving, beside the step like EngineDiskTier. The adapters
// themselves live in LoraRegistry (lora_registry.h: load, unload, find; any thread); everything
// else here runs on the engine thread:
//
//   admission  max_loras bounds the distinct adapters among the requests in flight. A new request
//              whose adapter would be one too many is held (in arrival order) and offered again
//              before each drain of new messages, ahead of them; an abort takes it out unstarted.
//   the step   adapters_of(out) gives the forward each scheduled sequence's adapter (empty when no
//              sequence has one: the base-only path, no per-row work).
//   events     the KV events' lora_name: an admitted request's chain roots are noted (only while KV
//              events are on), and each step's events are named from them (LoraBlockNames).
//   metrics    per-adapter running / waiting requests (vLLM's lora_requests_info).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_requests.h"
#include "engine/lora_registry.h"
#include "kv/block_events.h"
#include "sched/scheduler.h"
#include "tessera/engine.h"
#include "tessera/metrics.h"

namespace tessera {

class EngineLoras {
 public:
  // Loads config.lora_modules (the first that fails is the error).
  static Result<std::unique_ptr<EngineLoras>> create(const ModelConfig& base, const EngineConfig& config);

  // The adapters' load options from the engine's config (max_lora_rank, lora_dtype).
  static LoraLoadOptions load_options(const EngineConfig& config);

  LoraRegistry& registry() { return registry_; }  // load / unload / find / list: any thread
  const LoraRegistry& registry() const { return registry_; }

  // Whether `req` may enter the scheduler now: no adapter, its adapter already in flight, or fewer
  // than max_loras distinct adapters in `requests`.
  bool has_room(const ActiveRequest& req, const RequestMap& requests) const;
  void hold(EngineMessage msg) { held_.push_back(std::move(msg)); }
  // Offers each held message, oldest first, to `admit`; those it takes (true) leave the queue.
  void retry_held(const std::function<bool(EngineMessage&)>& admit);
  // A held request (abort before admission), or null; every held request (shutdown).
  std::unique_ptr<ActiveRequest> take_held(int64_t request_id);
  std::vector<std::unique_ptr<ActiveRequest>> take_all_held();

  // An admitted request's chain roots (its extra key per KV-cache group), for the events' names.
  void note_admitted(const ActiveRequest& req, int32_t num_groups);
  // records[i] is events[i]'s record (kv_event_batch keeps the order).
  void name_events(const std::vector<kv::BlockEvent>& records, std::vector<KvCacheEvent>& events);

  // Per scheduled sequence of `out`, its adapter or null; empty when none has one.
  const std::vector<const LoraAdapter*>& adapters_of(const sched::SchedulerOutput& out, const RequestMap& requests);

  // Per-adapter running (scheduled at least once) and waiting (queued or held) requests.
  void count(const RequestMap& requests, std::vector<LoraRequestCounts>& counts) const;

 private:
  EngineLoras(const ModelConfig& base, const EngineConfig& config)
      : registry_(base, load_options(config)), max_loras_(config.max_loras) {}
  LoraRegistry registry_;
  int32_t max_loras_;
  std::deque<EngineMessage> held_;               // kAdd messages held back by max_loras, in arrival order
  LoraBlockNames block_names_;                   // only fed while KV events are on
  std::vector<const LoraAdapter*> step_adapters_;  // adapters_of's answer
};

}  // namespace tessera

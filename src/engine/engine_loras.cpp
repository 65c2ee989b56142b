#include "engine/engine_loras.h"

#include <algorithm>

#include "kv/block_hash.h"

namespace tessera {

Result<std::unique_ptr<EngineLoras>> EngineLoras::create(const ModelConfig& base, const EngineConfig& config) {
  std::unique_ptr<EngineLoras> loras(new EngineLoras(base, config));
  for (const LoraModule& m : config.lora_modules) TESSERA_TRY(loras->registry_.load(m.name, m.path));
  return loras;
}

LoraLoadOptions EngineLoras::load_options(const EngineConfig& config) {
  LoraLoadOptions o;
  o.max_rank = config.max_lora_rank;
  o.storage = config.lora_dtype == "f16"   ? LoraLoadOptions::Storage::kF16
              : config.lora_dtype == "f32" ? LoraLoadOptions::Storage::kF32
                                           : LoraLoadOptions::Storage::kAuto;
  return o;
}

bool EngineLoras::has_room(const ActiveRequest& req, const RequestMap& requests) const {
  if (!req.lora) return true;
  std::vector<const LoadedLora*> seen;  // distinct adapters in flight (a handful)
  for (const auto& [id, r] : requests) {
    if (!r->lora || std::find(seen.begin(), seen.end(), r->lora.get()) != seen.end()) continue;
    if (r->lora == req.lora) return true;
    seen.push_back(r->lora.get());
  }
  return static_cast<int32_t>(seen.size()) < max_loras_;
}

void EngineLoras::retry_held(const std::function<bool(EngineMessage&)>& admit) {
  for (auto it = held_.begin(); it != held_.end();) it = admit(*it) ? held_.erase(it) : it + 1;
}

std::unique_ptr<ActiveRequest> EngineLoras::take_held(int64_t request_id) {
  auto it = std::find_if(held_.begin(), held_.end(), [&](const EngineMessage& m) { return m.request_id == request_id; });
  if (it == held_.end()) return nullptr;
  std::unique_ptr<ActiveRequest> req = std::move(it->request);
  held_.erase(it);
  return req;
}

std::vector<std::unique_ptr<ActiveRequest>> EngineLoras::take_all_held() {
  std::vector<std::unique_ptr<ActiveRequest>> all;
  for (EngineMessage& m : held_) all.push_back(std::move(m.request));
  held_.clear();
  return all;
}

void EngineLoras::note_admitted(const ActiveRequest& req, int32_t num_groups) {
  if (!req.lora) return;
  for (int32_t g = 0; g < num_groups; ++g) block_names_.note(kv::group_key(req.cache_extra_key, g), *req.lora);
}

void EngineLoras::name_events(const std::vector<kv::BlockEvent>& records, std::vector<KvCacheEvent>& events) {
  if (!registry_.empty()) block_names_.name(records, events);
}

const std::vector<const LoraAdapter*>& EngineLoras::adapters_of(const sched::SchedulerOutput& out,
                                                                const RequestMap& requests) {
  step_adapters_.clear();
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    auto it = requests.find(out.seqs[i].request_id);
    const LoraAdapter* a = it != requests.end() && it->second->lora ? it->second->lora->adapter.get() : nullptr;
    if (a != nullptr && step_adapters_.empty()) step_adapters_.assign(out.seqs.size(), nullptr);
    if (a != nullptr) step_adapters_[i] = a;
  }
  return step_adapters_;
}

void EngineLoras::count(const RequestMap& requests, std::vector<LoraRequestCounts>& counts) const {
  if (counts.empty() && held_.empty() && registry_.empty()) return;  // no adapter ever: nothing to count
  counts.clear();
  auto entry = [&](const std::string& name) -> LoraRequestCounts& {
    for (LoraRequestCounts& c : counts) {
      if (c.name == name) return c;
    }
    return counts.emplace_back(LoraRequestCounts{name, 0, 0});
  };
  for (const auto& [id, r] : requests) {
    if (!r->lora) continue;
    LoraRequestCounts& c = entry(r->lora->info.name);
    (r->first_scheduled ? c.running : c.waiting) += 1;
  }
  for (const EngineMessage& m : held_) entry(m.request->lora->info.name).waiting += 1;
}

}  // namespace tessera

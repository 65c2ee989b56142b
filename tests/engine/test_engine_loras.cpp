// EngineLoras (engine/engine_loras.h), model-free: max_loras admission over the requests in flight,
// the held queue's order and aborts, the step's per-sequence adapters, the per-adapter counts, and
// the KV events' adapter names (LoraBlockNames).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine_loras.h"

namespace tessera {
namespace {

std::shared_ptr<const LoadedLora> adapter(const std::string& name) {
  auto l = std::make_shared<LoadedLora>();
  l->adapter = std::shared_ptr<const LoraAdapter>();  // the bookkeeping never reads the weights
  l->info.name = name;
  return l;
}

std::unique_ptr<ActiveRequest> request(int64_t id, std::shared_ptr<const LoadedLora> lora, bool scheduled = false) {
  auto r = std::make_unique<ActiveRequest>();
  r->id = id;
  r->lora = std::move(lora);
  if (scheduled) r->first_scheduled = Clock::now();
  return r;
}

EngineMessage message(std::unique_ptr<ActiveRequest> r) {
  EngineMessage m;
  m.request_id = r->id;
  m.request = std::move(r);
  return m;
}

std::unique_ptr<EngineLoras> make(int32_t max_loras) {
  EngineConfig config;
  config.max_loras = max_loras;
  auto loras = EngineLoras::create(ModelConfig{}, config);
  EXPECT_TRUE(loras.ok());
  return std::move(*loras);
}

TEST(EngineLoras, MaxLorasCountsDistinctAdaptersInFlight) {
  auto loras = make(2);
  const auto a = adapter("a"), b = adapter("b"), c = adapter("c");
  RequestMap in_flight;
  in_flight[1] = request(1, a);
  in_flight[2] = request(2, a);
  in_flight[3] = request(3, nullptr);
  EXPECT_TRUE(loras->has_room(*request(9, c), in_flight));  // one distinct adapter (a) in flight
  in_flight[4] = request(4, b);
  EXPECT_FALSE(loras->has_room(*request(9, c), in_flight));  // a and b: c would be a third
  EXPECT_TRUE(loras->has_room(*request(9, a), in_flight));   // a is already in flight
  EXPECT_TRUE(loras->has_room(*request(9, nullptr), in_flight));  // the base model is never held
  in_flight.erase(4);
  EXPECT_TRUE(loras->has_room(*request(9, c), in_flight));
}

TEST(EngineLoras, HeldRequestsRetryInArrivalOrderAndAbort) {
  auto loras = make(1);
  const auto a = adapter("a"), b = adapter("b");
  loras->hold(message(request(10, a)));
  loras->hold(message(request(11, b)));
  loras->hold(message(request(12, a)));
  loras->hold(message(request(13, b)));
  std::vector<int64_t> offered, admitted;
  loras->retry_held([&](EngineMessage& m) {  // admit a's requests only
    offered.push_back(m.request_id);
    if (m.request->lora->info.name != "a") return false;
    admitted.push_back(m.request_id);
    return true;
  });
  EXPECT_EQ(offered, (std::vector<int64_t>{10, 11, 12, 13}));
  EXPECT_EQ(admitted, (std::vector<int64_t>{10, 12}));
  EXPECT_EQ(loras->take_held(12), nullptr);  // admitted: no longer held
  std::unique_ptr<ActiveRequest> aborted = loras->take_held(13);
  ASSERT_NE(aborted, nullptr);
  EXPECT_EQ(aborted->id, 13);
  std::vector<std::unique_ptr<ActiveRequest>> rest = loras->take_all_held();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0]->id, 11);
  EXPECT_TRUE(loras->take_all_held().empty());
}

TEST(EngineLoras, CountsRunningWaitingAndHeldPerAdapter) {
  auto loras = make(1);
  const auto a = adapter("a"), b = adapter("b");
  RequestMap in_flight;
  in_flight[1] = request(1, a, /*scheduled=*/true);
  in_flight[2] = request(2, a);
  in_flight[3] = request(3, nullptr, true);
  std::vector<LoraRequestCounts> counts;
  loras->count(in_flight, counts);  // nothing held and no adapter loaded, but counts start empty:
  EXPECT_TRUE(counts.empty());      // no adapter ever seen, nothing to count (the base-only path)
  loras->hold(message(request(4, b)));
  loras->count(in_flight, counts);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].name, "a");
  EXPECT_EQ(counts[0].running, 1);
  EXPECT_EQ(counts[0].waiting, 1);
  EXPECT_EQ(counts[1].name, "b");
  EXPECT_EQ(counts[1].running, 0);
  EXPECT_EQ(counts[1].waiting, 1);
}

TEST(EngineLoras, StepAdaptersPerScheduledSequence) {
  auto loras = make(4);
  auto weights = std::make_shared<LoadedLora>();
  // A stand-in address (an aliasing pointer that owns nothing): adapters_of compares, never reads it.
  weights->adapter = std::shared_ptr<const LoraAdapter>(std::shared_ptr<int>(), reinterpret_cast<const LoraAdapter*>(0x10));
  RequestMap in_flight;
  in_flight[1] = request(1, nullptr);
  in_flight[2] = request(2, weights);
  sched::SchedulerOutput out;
  out.seqs.resize(3);
  out.seqs[0].request_id = 1;
  out.seqs[1].request_id = 2;
  out.seqs[2].request_id = 1;
  const std::vector<const LoraAdapter*>& per_seq = loras->adapters_of(out, in_flight);
  ASSERT_EQ(per_seq.size(), 3u);
  EXPECT_EQ(per_seq[0], nullptr);
  EXPECT_EQ(per_seq[1], weights->adapter.get());
  EXPECT_EQ(per_seq[2], nullptr);
  in_flight.erase(2);
  out.seqs.pop_back();
  out.seqs[1].request_id = 1;
  EXPECT_TRUE(loras->adapters_of(out, in_flight).empty());  // no adapter this step: the base-only path
}

TEST(EngineLoras, LoadOptionsFromTheConfig) {
  EngineConfig config;
  config.max_lora_rank = 32;
  EXPECT_EQ(EngineLoras::load_options(config).max_rank, 32);
  EXPECT_EQ(EngineLoras::load_options(config).storage, LoraLoadOptions::Storage::kAuto);
  config.lora_dtype = "f16";
  EXPECT_EQ(EngineLoras::load_options(config).storage, LoraLoadOptions::Storage::kF16);
  config.lora_dtype = "f32";
  EXPECT_EQ(EngineLoras::load_options(config).storage, LoraLoadOptions::Storage::kF32);
}

// The KV events' lora_name, pool then disk tier: a chain root is named by its noted extra key,
// its child by the parent; a disk event by the pool's name of its hash, or (its pool block gone)
// by its parent on disk; a disk removal forgets the name; base-model blocks stay unnamed.
TEST(LoraBlockNames, NamesPoolThenDiskEvents) {
  LoadedLora a;
  a.info.name = "a";
  a.generation = 7;
  LoraBlockNames names;
  names.note(/*extra_key=*/99, a);
  const auto stored = [](uint64_t hash, std::optional<uint64_t> parent, uint64_t extra_key) {
    kv::BlockEvent r;
    r.kind = kv::BlockEventKind::kStored;
    r.hash = hash;
    r.has_parent = parent.has_value();
    r.parent_hash = parent.value_or(0);
    r.extra_key = extra_key;
    return r;
  };
  // Pool: the adapter's chain 10 -> 11 and a base block 20.
  std::vector<kv::BlockEvent> records = {stored(10, std::nullopt, 99), stored(11, 10, 0), stored(20, std::nullopt, 0)};
  std::vector<KvCacheEvent> events(3);
  names.name(records, events);
  EXPECT_EQ(events[0].lora_name, "a");
  EXPECT_EQ(events[0].lora_id, 7u);
  EXPECT_EQ(events[1].lora_name, "a");
  EXPECT_EQ(events[2].lora_name, "");
  // The pool evicts 11; then the disk tier reports 10, 11 and 20 written, and a block 12 whose
  // parent is 11: 11 by its disk parent 10 (its pool name is gone), 12 by its disk parent 11.
  kv::BlockEvent removed;
  removed.kind = kv::BlockEventKind::kRemoved;
  removed.hash = 11;
  records = {removed};
  events.assign(1, KvCacheEvent{});
  names.name(records, events);
  const auto disk = [](KvCacheEvent::Kind kind, uint64_t hash, std::optional<uint64_t> parent) {
    KvCacheEvent e;
    e.kind = kind;
    e.medium = KvCacheEvent::Medium::kDisk;
    e.block_hash = hash;
    e.parent_block_hash = parent;
    return e;
  };
  records.clear();
  events = {disk(KvCacheEvent::Kind::kBlockStored, 10, std::nullopt), disk(KvCacheEvent::Kind::kBlockStored, 11, 10),
            disk(KvCacheEvent::Kind::kBlockStored, 20, std::nullopt), disk(KvCacheEvent::Kind::kBlockStored, 12, 11)};
  names.name(records, events);
  EXPECT_EQ(events[0].lora_name, "a");
  EXPECT_EQ(events[1].lora_name, "a");
  EXPECT_EQ(events[1].lora_id, 7u);
  EXPECT_EQ(events[2].lora_name, "");
  EXPECT_EQ(events[3].lora_name, "a");
  // Evicted from disk: a later child of 12 finds no name there (and 12's pool block never existed).
  events = {disk(KvCacheEvent::Kind::kBlockRemoved, 12, std::nullopt), disk(KvCacheEvent::Kind::kBlockStored, 13, 12)};
  names.name(records, events);
  EXPECT_EQ(events[1].lora_name, "");
}

}  // namespace
}  // namespace tessera

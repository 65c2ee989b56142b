// kv_events_record: a real engine publishing its KV-cache events through the real publisher, and
// writing down, beside them, the block pool's own record as the engine drains it (each batch handed
// to EngineConfig::on_kv_events, before it reaches the publisher). tests/e2e/test_kv_events.py runs
// it with a pyzmq SUB socket bound to ENDPOINT and checks that what arrives over ZeroMQ, decoded by
// Python's msgpack, is that record: the same events in the same batches and order, sequence numbers
// 0, 1, 2, ... without a gap.
//
//   kv_events_record MODEL KV_BYTES ENDPOINT ROUNDS_JSON RECORD_OUT
//
// ROUNDS_JSON: [[prompt ids, ...], ...]; each round's prompts are submitted together (submit_all)
// and run to the end (greedy, 2 tokens) before the next round. Start-up prints "ready <num KV
// blocks>" on stdout and waits for one line on stdin (the subscriber has joined; a PUB drops what
// it sends before that), then runs the rounds, flushes the publisher and writes RECORD_OUT as JSON:
// {"topic", "block_size", "num_kv_blocks", "batches": [[{"kind", "hash", "parent", "tokens"}, ...]],
//  "num_evictions", "num_cached_blocks"}; hashes as decimal strings (64-bit, beyond a double).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv_events/event_encoder.h"
#include "kv_events/kv_event_publisher.h"
#include "tessera/engine.h"

namespace {

using json = nlohmann::json;
using tessera::KvCacheEvent;

json event_json(const KvCacheEvent& e) {
  json j;
  switch (e.kind) {
    case KvCacheEvent::Kind::kBlockStored: j["kind"] = "BlockStored"; break;
    case KvCacheEvent::Kind::kBlockRemoved: j["kind"] = "BlockRemoved"; break;
    case KvCacheEvent::Kind::kAllBlocksCleared: j["kind"] = "AllBlocksCleared"; break;
  }
  j["hash"] = std::to_string(e.block_hash);
  j["parent"] = e.parent_block_hash ? json(std::to_string(*e.parent_block_hash)) : json(nullptr);
  j["tokens"] = e.token_ids;
  return j;
}

int fail(const std::string& what) {
  std::fprintf(stderr, "kv_events_record: error: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) return fail("usage: kv_events_record MODEL KV_BYTES ENDPOINT ROUNDS_JSON RECORD_OUT");
  const std::string model = argv[1], endpoint = argv[3], rounds_path = argv[4], out_path = argv[5];
  std::ifstream rounds_in(rounds_path);
  const json rounds = json::parse(rounds_in, nullptr, false);
  if (!rounds.is_array()) return fail("cannot read the rounds from " + rounds_path);

  auto publisher = tessera::kv_events::KvEventPublisher::create(endpoint);
  if (!publisher.ok()) return fail(publisher.error().message);
  tessera::kv_events::KvEventPublisher& pub = *publisher.value();
  const std::string topic = tessera::kv_events::event_topic("record", "stories");
  pub.set_topic(topic);

  std::mutex mu;
  json batches = json::array();  // the pool's record, batch by batch
  int32_t block_size = 0;
  tessera::EngineConfig config;
  config.model_path = model;
  config.num_threads = 1;
  config.kv_cache_bytes = std::stoll(argv[2]);
  config.max_model_len = 256;
  config.on_kv_events = [&](tessera::KvEventBatch&& batch) {
    {
      std::lock_guard<std::mutex> lock(mu);
      json events = json::array();
      for (const KvCacheEvent& e : batch.events) events.push_back(event_json(e));
      batches.push_back(std::move(events));
      block_size = batch.block_size;
    }
    pub.publish(std::move(batch));
  };
  auto created = tessera::Engine::create(config);
  if (!created.ok()) return fail(created.error().message);
  tessera::Engine& engine = *created.value();

  std::cout << "ready " << engine.model_info().num_kv_blocks << std::endl;
  std::string go;
  std::getline(std::cin, go);

  for (const json& round : rounds) {
    std::vector<tessera::GenerateRequest> requests;
    for (const json& ids : round) {
      tessera::GenerateRequest r;
      r.prompt_ids = ids.get<std::vector<int32_t>>();
      r.params.max_tokens = 2;
      r.params.temperature = 0.0f;
      r.params.ignore_eos = true;
      requests.push_back(std::move(r));
    }
    auto streams = engine.submit_all(std::move(requests));
    if (!streams.ok()) return fail(streams.error().message);
    for (auto& s : streams.value()) {
      while (s->next()) {
      }
    }
  }
  // The counters of the step that ended the last request are published after that step: read
  // them once the engine thread has stopped.
  engine.shutdown(std::chrono::milliseconds(0));
  const tessera::MetricsSnapshot m = engine.metrics();
  pub.shutdown(std::chrono::milliseconds(2000));

  json out;
  {
    std::lock_guard<std::mutex> lock(mu);
    out = {{"topic", topic}, {"block_size", block_size}, {"num_kv_blocks", engine.model_info().num_kv_blocks},
           {"batches", batches}, {"num_evictions", m.num_kv_evictions}, {"num_cached_blocks", m.num_kv_blocks_cached},
           {"num_batches_sent", pub.counters().num_batches_sent},
           {"num_batches_dropped", pub.counters().num_batches_dropped}};
  }
  std::ofstream(out_path) << out.dump() << "\n";
  return 0;
}

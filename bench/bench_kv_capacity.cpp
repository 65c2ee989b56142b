// B6 KV capacity and B7 shared prompt with n samples: the real Scheduler and KvCacheManager driven
// by a fake runner (no model: these are bookkeeping numbers, exact and deterministic, so one run
// each side suffices; both sides run in this one invocation on the same workload).
//
// B6: a fixed KV byte budget (SmolLM2-135M's 23,040 bytes per token at f16 by default), 200
//     requests all queued at once, prompts U[32, 512] tokens, outputs U[1, 512] tokens. Paged
//     (block 16) vs contiguous max-length reservation: the same scheduler with one block of
//     max_model_len tokens per sequence, which is exactly what reserving max_model_len slots per
//     request does. Reports peak and mean concurrent sequences, KV utilization (slots holding a
//     token / slots allocated), waste per sequence (allocated - used slots), preemptions, steps.
// B7: one 512-token prompt, n = 4 and 8 samples of 128 tokens: peak KV blocks with the samples
//     forked from the prompt's blocks vs n independent requests (prefix cache off), and the
//     share of the ideal saving (n - 1) x prompt blocks that is achieved.
//
//   build-x/bench/bench_kv_capacity [--kv-bytes 268435456] [--bytes-per-token 23040]
//                                   [--max-model-len 2048] [--num-requests 200]
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "sched/scheduler.h"

using namespace tessera;
using namespace tessera::sched;

namespace {

struct CapacityResult {
  int32_t peak_seqs = 0;         // most sequences in one step
  double mean_seqs = 0;          // mean sequences per step
  double mean_utilization = 0;   // mean over steps of used slots / allocated slots
  double mean_waste = 0;         // mean over steps of (allocated - used) slots per sequence
  double max_waste = 0;          // largest per-step mean waste per sequence
  int64_t preemptions = 0;
  int64_t steps = 0;
  int32_t num_blocks = 0;        // usable blocks
};

// Every sequence needing logits gets num_samples copies of a non-EOS token.
ModelRunnerOutput fake_run(const SchedulerOutput& out) {
  ModelRunnerOutput r;
  for (const ScheduledSeq& s : out.seqs) {
    std::vector<int32_t> t;
    if (s.needs_logits) t.assign(static_cast<size_t>(s.num_samples), 1000 + (s.start_position % 7));
    r.sampled_token_ids.push_back(std::move(t));
  }
  return r;
}

SchedulerConfig config_for(int64_t budget_tokens, int32_t block_size, int32_t max_model_len) {
  SchedulerConfig c;
  c.max_num_seqs = 256;
  c.max_num_batched_tokens = 2048;
  c.max_model_len = max_model_len;
  c.block_size = block_size;
  c.num_blocks = static_cast<int32_t>(budget_tokens / block_size) + 1;
  c.enable_prefix_caching = false;
  c.check_integrity_every_step = false;
  return c;
}

CapacityResult run_capacity(const SchedulerConfig& c, const std::vector<NewRequest>& reqs) {
  Scheduler s(c);
  for (const NewRequest& r : reqs) {
    const Status st = s.add_request(r);
    TESSERA_CHECK(st.ok(), "request refused: {}", st.ok() ? "" : st.error().message);
  }
  CapacityResult res;
  res.num_blocks = c.num_blocks - 1;
  double sum_seqs = 0, sum_util = 0, sum_waste = 0;
  while (s.has_unfinished_requests()) {
    const SchedulerOutput out = s.schedule();
    if (out.seqs.empty()) break;
    int64_t used_slots = 0;
    for (const ScheduledSeq& q : out.seqs) used_slots += q.start_position + static_cast<int64_t>(q.token_ids.size());
    const double alloc_slots = static_cast<double>(s.stats().kv.num_blocks_used) * c.block_size;
    const auto n = static_cast<double>(out.seqs.size());
    res.peak_seqs = std::max(res.peak_seqs, static_cast<int32_t>(out.seqs.size()));
    sum_seqs += n;
    sum_util += used_slots / alloc_slots;
    const double waste = (alloc_slots - static_cast<double>(used_slots)) / n;
    sum_waste += waste;
    res.max_waste = std::max(res.max_waste, waste);
    res.steps += 1;
    s.update_from_output(out, fake_run(out));
  }
  res.mean_seqs = sum_seqs / static_cast<double>(res.steps);
  res.mean_utilization = sum_util / static_cast<double>(res.steps);
  res.mean_waste = sum_waste / static_cast<double>(res.steps);
  res.preemptions = s.stats().num_preemptions;
  return res;
}

// Peak blocks held while the requests run to completion.
int32_t peak_blocks(const SchedulerConfig& c, const std::vector<NewRequest>& reqs) {
  Scheduler s(c);
  for (const NewRequest& r : reqs) TESSERA_CHECK(s.add_request(r).ok(), "refused");
  int32_t peak = 0;
  while (s.has_unfinished_requests()) {
    const SchedulerOutput out = s.schedule();
    if (out.seqs.empty()) break;
    peak = std::max(peak, s.stats().kv.num_blocks_used);
    s.update_from_output(out, fake_run(out));
  }
  return peak;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t kv_bytes = int64_t{256} << 20, bytes_per_token = 23040;
  int32_t max_model_len = 2048, num_requests = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (a == "--kv-bytes") kv_bytes = v;
    else if (a == "--bytes-per-token") bytes_per_token = v;
    else if (a == "--max-model-len") max_model_len = static_cast<int32_t>(v);
    else if (a == "--num-requests") num_requests = static_cast<int32_t>(v);
  }
  const int64_t budget_tokens = kv_bytes / bytes_per_token;

  // ---- B6 ----
  std::mt19937_64 rng(6);
  std::vector<NewRequest> reqs;
  for (int32_t i = 0; i < num_requests; ++i) {
    NewRequest r;
    r.id = i;
    std::vector<int32_t> prompt(static_cast<size_t>(std::uniform_int_distribution<int32_t>(32, 512)(rng)));
    for (int32_t& t : prompt) t = std::uniform_int_distribution<int32_t>(256, 49151)(rng);
    r.prompt = std::make_shared<const std::vector<int32_t>>(std::move(prompt));
    r.stop.max_tokens = std::uniform_int_distribution<int32_t>(1, 512)(rng);
    r.stop.eos_token_ids = {2};
    reqs.push_back(std::move(r));
  }
  const CapacityResult paged = run_capacity(config_for(budget_tokens, 16, max_model_len), reqs);
  const CapacityResult contiguous = run_capacity(config_for(budget_tokens, max_model_len, max_model_len), reqs);
  std::printf("B6 KV capacity: budget %.0f MiB = %lld tokens (%lld bytes/token), %d requests, prompt U[32,512], "
              "output U[1,512], max_model_len %d\n",
              kv_bytes / 1048576.0, static_cast<long long>(budget_tokens), static_cast<long long>(bytes_per_token),
              num_requests, max_model_len);
  std::printf("%-34s %12s %12s %14s %18s %12s %8s\n", "", "peak seqs", "mean seqs", "KV utilization",
              "waste/seq (slots)", "preemptions", "steps");
  auto row = [](const char* name, const CapacityResult& r) {
    std::printf("%-34s %12d %12.1f %13.1f%% %9.1f (max %.1f) %12lld %8lld\n", name, r.peak_seqs, r.mean_seqs,
                r.mean_utilization * 100, r.mean_waste, r.max_waste, static_cast<long long>(r.preemptions),
                static_cast<long long>(r.steps));
  };
  row("paged (block 16)", paged);
  const std::string cname = "contiguous (" + std::to_string(max_model_len) + "-slot reservation)";
  row(cname.c_str(), contiguous);
  std::printf("paged / contiguous: peak concurrency %.2fx, mean concurrency %.2fx, steps %.2fx fewer\n",
              static_cast<double>(paged.peak_seqs) / contiguous.peak_seqs, paged.mean_seqs / contiguous.mean_seqs,
              static_cast<double>(contiguous.steps) / paged.steps);
  std::printf("waste <= block_size - 1 = 15 slots per sequence: %s (max per-step mean %.1f)\n\n",
              paged.max_waste <= 15 ? "yes" : "NO", paged.max_waste);

  // ---- B7 ----
  std::printf("B7 shared prompt: one 512-token prompt, 128 output tokens per sample, block 16\n");
  std::printf("%4s %18s %18s %14s %14s %12s\n", "n", "shared peak blocks", "independent peak", "ideal saving",
              "saving", "of ideal");
  std::vector<int32_t> prompt(512);
  for (int32_t& t : prompt) t = std::uniform_int_distribution<int32_t>(256, 49151)(rng);
  for (int32_t n : {4, 8}) {
    SchedulerConfig c = config_for(4096 * 16, 16, max_model_len);
    NewRequest root;
    root.id = 0;
    root.prompt = std::make_shared<const std::vector<int32_t>>(prompt);
    root.stop.max_tokens = 128;
    root.stop.eos_token_ids = {2};
    root.num_samples = n;
    const int32_t shared = peak_blocks(c, {root});
    std::vector<NewRequest> copies;
    for (int32_t i = 0; i < n; ++i) {
      NewRequest r = root;
      r.id = i;
      r.num_samples = 1;
      copies.push_back(std::move(r));
    }
    const int32_t independent = peak_blocks(c, copies);
    const int32_t ideal = (n - 1) * 512 / 16;
    std::printf("%4d %18d %18d %14d %14d %11.1f%%\n", n, shared, independent, ideal, independent - shared,
                100.0 * (independent - shared) / ideal);
  }
  return 0;
}

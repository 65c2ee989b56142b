// Steady-state allocation test of the model runner: this binary replaces the global operator new
// with a counting one and checks that, once the first steps have sized the reusable buffers, a
// decode step (batch building, the batched paged forward through the AMX/VNNI matmuls and the
// fused decode attention, greedy rows picked on the pool, sampled rows through every filter, and
// the output) allocates nothing. The scheduler's outputs are built before counting: they are the
// plain data crossing the boundary, not the runner's buffers.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../model/synthetic_model.h"
#include "../util/counting_new.h"
#include "runner/model_runner.h"
#include "util/cpu_features.h"

namespace tessera {
namespace {

constexpr int32_t kSeqs = 16;        // a batched decode step: the AMX tiles from 12 rows
constexpr int32_t kBlockSize = 16;
constexpr int32_t kBlocksPerSeq = 4;  // 64 positions each
constexpr int32_t kPrompt = 8;

// Sequence s owns blocks 1 + 4s .. 4 + 4s (block 0 is the null block of padding lanes).
sched::ScheduledSeq scheduled(int32_t s, int32_t start, int32_t num_tokens) {
  sched::ScheduledSeq q;
  q.seq_id = q.request_id = s;
  q.start_position = start;
  for (int32_t i = 0; i < num_tokens; ++i) q.token_ids.push_back((7 * s + 3 * (start + i)) % 300 + 1);
  for (int32_t b = 0; b < kBlocksPerSeq; ++b) q.block_table.push_back(1 + kBlocksPerSeq * s + b);
  q.needs_logits = true;
  return q;
}

TEST(RunnerAlloc, DecodeStepAllocatesNothing) {
  testing::SyntheticShape shape;
  shape.name = "runner_alloc";
  shape.dim = 256, shape.num_heads = 4, shape.num_kv_heads = 2, shape.ffn_dim = 512;  // head_dim 64
  shape.weight_type = DType::Q4_1;
  const std::string path = ::testing::TempDir() + "/synthetic_runner_alloc.gguf";
  ASSERT_TRUE(testing::write_synthetic_model(path, shape).ok());
  auto loaded = LlamaModel::load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const LlamaModel& model = **loaded;
  KvStorage kv(model.config(), 1 + kSeqs * kBlocksPerSeq, kBlockSize, kernels::KvDType::kF16);
  RunnerConfig rc;
  rc.max_num_batched_tokens = 256, rc.max_num_seqs = kSeqs, rc.max_model_len = kBlocksPerSeq * kBlockSize;
  rc.num_threads = 2;
  ModelRunner runner(model, kv, rc);

  // Even sequences greedy, odd ones sampled through temperature, top-k, top-p and penalties.
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams sampled;
  sampled.temperature = 0.8f, sampled.top_k = 40, sampled.top_p = 0.9f, sampled.repetition_penalty = 1.1f;
  std::vector<sample::Rng> rngs;
  for (int32_t s = 0; s < kSeqs; ++s) rngs.emplace_back(100 + s);
  std::vector<sample::Rng*> rng_ptrs;
  for (sample::Rng& r : rngs) rng_ptrs.push_back(&r);
  const std::vector<int32_t> prompt(kPrompt, 5);
  // Sequence s's sampling views, as the engine hands them down with each step (index = seq id).
  std::vector<SequenceSampling> sampling(kSeqs);
  for (int32_t s = 0; s < kSeqs; ++s) {
    SequenceSampling& ss = sampling[static_cast<size_t>(s)];
    ss.params = s % 2 == 0 ? &greedy : &sampled;
    ss.rngs = std::span<sample::Rng* const>(rng_ptrs).subspan(static_cast<size_t>(s), 1);
    ss.prompt = prompt;
  }

  // Prefill, then decode steps; every scheduler output built up front.
  constexpr int32_t kDecodeSteps = 8, kCounted = 4;
  std::vector<sched::SchedulerOutput> steps(1 + kDecodeSteps);
  for (int32_t s = 0; s < kSeqs; ++s) steps[0].seqs.push_back(scheduled(s, 0, kPrompt));
  for (int32_t d = 0; d < kDecodeSteps; ++d) {
    for (int32_t s = 0; s < kSeqs; ++s) steps[static_cast<size_t>(1 + d)].seqs.push_back(scheduled(s, kPrompt + d, 1));
  }
  // Every ISA level this CPU has (the matmuls, attention and ops each dispatch on it; the weights
  // stay packed for the AVX-512/AMX kernels, which lower levels ignore).
  std::vector<IsaLevel> levels{IsaLevel::kScalar};
  if (detected_isa_level() >= IsaLevel::kAvx2) levels.push_back(IsaLevel::kAvx2);
  if (detected_isa_level() >= IsaLevel::kAvx512) levels.push_back(IsaLevel::kAvx512);
  for (const IsaLevel level : levels) {
    SCOPED_TRACE(std::string(isa_name(level)));
    set_isa_level(level);
    for (size_t i = 0; i < steps.size(); ++i) {
      const int64_t before = tessera::testing::num_allocations();
      const RunnerOutput& r = runner.execute(steps[i], sampling);
      if (i + kCounted >= steps.size()) {
        EXPECT_EQ(tessera::testing::num_allocations() - before, 0) << "step " << i;
      }
      ASSERT_EQ(r.sampled.sampled_token_ids.size(), static_cast<size_t>(kSeqs));
      for (const std::vector<int32_t>& tokens : r.sampled.sampled_token_ids) {
        ASSERT_EQ(tokens.size(), 1u);
        EXPECT_TRUE(tokens[0] >= 0 && tokens[0] < shape.vocab);
      }
    }
  }
  set_isa_level(detected_isa_level());
  // The counter works: building one more scheduled sequence allocates its vectors.
  const int64_t before = tessera::testing::num_allocations();
  const sched::ScheduledSeq extra = scheduled(0, kPrompt + kDecodeSteps, 1);
  EXPECT_GT(tessera::testing::num_allocations() - before, 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tessera

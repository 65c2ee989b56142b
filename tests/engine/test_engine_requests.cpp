// Request state is stored once (issue 29): a request's prompt ids live in one immutable vector that
// the engine's request state, the scheduler's sequences (the root and every forked sample), the
// runner's sampling view and the SpecDecoder's view all share. Model-free: the engine's own view
// builders (engine_requests.h) feed a real Scheduler; a fake runner draws the tokens.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <optional>

#include "engine/engine_requests.h"
#include "sched/scheduler.h"

namespace tessera {
namespace {

std::unique_ptr<ActiveRequest> make_active(int64_t id, int32_t num_prompt, int32_t n) {
  auto req = std::make_unique<ActiveRequest>();
  req->id = id;
  req->params.n = n;
  req->params.max_tokens = 8;
  std::vector<int32_t> ids(static_cast<size_t>(num_prompt));
  std::iota(ids.begin(), ids.end(), 10);
  const int32_t* data = ids.data();
  req->prompt = std::make_shared<const std::vector<int32_t>>(std::move(ids));
  EXPECT_EQ(req->prompt->data(), data);  // moved in, as submit() does: the caller's buffer itself
  req->samples.resize(static_cast<size_t>(n));
  for (SampleState& s : req->samples) req->rng_ptrs.push_back(&s.rng);
  return req;
}

TEST(EngineRequests, PromptIsStoredOncePerRequestAndSharedByItsSamples) {
  sched::SchedulerConfig c;
  c.block_size = 4;
  c.num_blocks = 64;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 64;
  c.check_integrity_every_step = true;
  sched::Scheduler scheduler(c);

  auto req = make_active(5, 10, 3);  // n = 3: one root, two forked samples after the prompt
  const int32_t* prompt_data = req->prompt->data();
  EXPECT_EQ(req->prompt.use_count(), 1);  // the engine's request state only
  ASSERT_TRUE(scheduler.add_request(scheduler_request_of(*req, {2}, "")).ok());
  EXPECT_EQ(req->prompt.use_count(), 2);  // + the scheduler's root sequence; no copy of the ids
  EXPECT_EQ(scheduler.find_request(5)->prompt.get(), req->prompt.get());

  // Step 1: the whole prompt; the runner draws 3 first tokens and the scheduler forks 2 samples.
  sched::SchedulerOutput out = scheduler.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  ASSERT_EQ(out.seqs[0].num_samples, 3);
  const SequenceSampling ss = sampling_view_of(*req, out.seqs[0].sample_index);
  EXPECT_EQ(ss.prompt.data(), prompt_data);  // the runner reads the same ids
  EXPECT_EQ(ss.prompt.size(), 10u);
  EXPECT_EQ(ss.params, &req->params);
  sched::ModelRunnerOutput drawn;
  drawn.sampled_token_ids.push_back({100, 200, 300});
  const auto updates = scheduler.update_from_output(out, drawn);
  ASSERT_EQ(updates.size(), 3u);
  for (const sched::RequestUpdate& u : updates) {
    const std::optional<sched::Request> r = scheduler.find_request(u.seq_id);  // a copy (one more holder)
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->prompt->data(), prompt_data) << "sample " << u.sample_index;
    EXPECT_EQ(r->num_tokens(), 11);
    req->samples[static_cast<size_t>(u.sample_index)].output_ids = u.new_token_ids;
    const speculative::SpecSequence seq = spec_sequence_of(*req, u.seq_id, u.sample_index);
    EXPECT_EQ(seq.prompt.data(), prompt_data);  // the proposers read the same ids
    EXPECT_EQ(seq.output.size(), 1u);
  }
  EXPECT_EQ(req->prompt.use_count(), 4);  // engine + root + 2 samples: 3 holders, 1 copy of the ids

  // Step 2: three decode chunks of one token each; the prompt is not handed down again.
  out = scheduler.schedule();
  ASSERT_EQ(out.seqs.size(), 3u);
  for (const sched::ScheduledSeq& s : out.seqs) EXPECT_EQ(s.token_ids.size(), 1u);

  // Finished sequences let go of the holder: the engine's is the last.
  scheduler.abort_request(5);
  EXPECT_EQ(req->prompt.use_count(), 1);
}

}  // namespace
}  // namespace tessera

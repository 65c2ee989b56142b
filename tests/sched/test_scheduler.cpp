// Scheduler core: exact token counts per step, budget, chunk boundaries, preemption order,
// static vs continuous batching, abort, refusal. No model: a fake runner answers.
#include <map>

#include "sched_test_util.h"

namespace tessera::sched {
namespace {

using namespace testing_util;
using Counts = std::vector<std::pair<int64_t, int32_t>>;

SchedulerConfig small_config(int32_t num_blocks, int32_t budget, int32_t max_seqs) {
  SchedulerConfig c;
  c.block_size = 4;
  c.num_blocks = num_blocks;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.max_model_len = 64;
  c.enable_prefix_caching = false;
  c.check_integrity_every_step = true;
  return c;
}

// Runs one step with the default fake runner; collects outputs per sequence.
struct Driver {
  explicit Driver(Scheduler& scheduler) : s(scheduler) {}
  Scheduler& s;
  std::map<int64_t, V> outputs;
  std::map<int64_t, RequestStatus> final_status;
  SchedulerOutput step(const TokenFn& fn = nullptr) {
    SchedulerOutput out = s.schedule();
    for (const RequestUpdate& u : s.update_from_output(out, fake_run(out, fn))) {
      auto& o = outputs[u.seq_id];
      o.insert(o.end(), u.new_token_ids.begin(), u.new_token_ids.end());
      if (u.finished()) final_status[u.seq_id] = u.status;
    }
    s.check_integrity();
    return out;
  }
};

TEST(Scheduler, ChunkedPrefillAndDecodeShareOneBudget) {
  Scheduler s(small_config(33, 10, 4));
  ASSERT_TRUE(s.add_request(make_request(1, iota(25, 10), 5)).ok());
  ASSERT_TRUE(s.add_request(make_request(2, iota(3, 50), 5)).ok());
  Driver d{s};

  SchedulerOutput o = d.step();
  EXPECT_EQ(counts(o), (Counts{{1, 10}}));
  EXPECT_EQ(o.seqs[0].start_position, 0);
  EXPECT_EQ(o.seqs[0].token_ids, iota(10, 10));
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2, 3}));
  EXPECT_FALSE(o.seqs[0].needs_logits);
  EXPECT_TRUE(o.seqs[0].is_new);

  o = d.step();
  EXPECT_EQ(counts(o), (Counts{{1, 10}}));
  EXPECT_EQ(o.seqs[0].start_position, 10);
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2, 3, 4, 5}));
  EXPECT_FALSE(o.seqs[0].is_new);

  o = d.step();  // the last chunk of 1, then 2's whole prompt in the same batch
  EXPECT_EQ(counts(o), (Counts{{1, 5}, {2, 3}}));
  EXPECT_EQ(o.num_scheduled_tokens, 8);
  EXPECT_TRUE(o.seqs[0].needs_logits);
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(o.seqs[1].block_table, (V{8}));
  EXPECT_EQ(d.outputs[1], (V{1025}));
  EXPECT_EQ(d.outputs[2], (V{1003}));

  o = d.step();  // both decode
  EXPECT_EQ(counts(o), (Counts{{1, 1}, {2, 1}}));
  EXPECT_EQ(o.seqs[0].token_ids, (V{1025}));
  EXPECT_EQ(o.seqs[0].start_position, 25);
  EXPECT_EQ(o.seqs[1].block_table, (V{8}));
  o = d.step();
  EXPECT_EQ(o.seqs[1].block_table, (V{8, 9}));  // position 4 opens a new block only now

  while (s.has_unfinished_requests()) d.step();
  EXPECT_EQ(d.outputs[1], (V{1025, 1026, 1027, 1028, 1029}));
  EXPECT_EQ(d.final_status[1], RequestStatus::kFinishedLength);
  EXPECT_EQ(s.stats().kv.num_blocks_used, 0);
}

TEST(Scheduler, LongPrefillThresholdCapsEachSequence) {
  SchedulerConfig c = small_config(33, 100, 4);
  c.long_prefill_token_threshold = 4;
  Scheduler s(c);
  ASSERT_TRUE(s.add_request(make_request(1, iota(9, 10), 3)).ok());
  ASSERT_TRUE(s.add_request(make_request(2, iota(2, 50), 3)).ok());
  Driver d{s};
  EXPECT_EQ(counts(d.step()), (Counts{{1, 4}, {2, 2}}));
  EXPECT_EQ(counts(d.step()), (Counts{{1, 4}, {2, 1}}));
  SchedulerOutput o = d.step();
  EXPECT_EQ(counts(o), (Counts{{1, 1}, {2, 1}}));
  EXPECT_TRUE(o.seqs[0].needs_logits);
  EXPECT_EQ(o.seqs[0].start_position, 8);
}

TEST(Scheduler, UnchunkedPrefillWaitsForTheWholePrompt) {
  SchedulerConfig c = small_config(33, 64, 4);
  c.enable_chunked_prefill = false;
  Scheduler s(c);
  ASSERT_TRUE(s.add_request(make_request(1, iota(40, 10), 3)).ok());
  ASSERT_TRUE(s.add_request(make_request(2, iota(30, 10), 3)).ok());
  Driver d{s};
  EXPECT_EQ(counts(d.step()), (Counts{{1, 40}}));           // 2 would need 30 of the 24 left
  EXPECT_EQ(counts(d.step()), (Counts{{1, 1}, {2, 30}}));
}

TEST(Scheduler, PreemptsTheNewestAndResumesItWithoutLoss) {
  Scheduler s(small_config(5, 100, 4));  // 4 usable blocks of 4 tokens
  ASSERT_TRUE(s.add_request(make_request(1, iota(8, 10), 8)).ok());
  ASSERT_TRUE(s.add_request(make_request(2, iota(8, 50), 8)).ok());
  Driver d{s};
  SchedulerOutput o = d.step();
  EXPECT_EQ(counts(o), (Counts{{1, 8}, {2, 8}}));
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2}));
  EXPECT_EQ(o.seqs[1].block_table, (V{3, 4}));

  o = d.step();  // 1 needs a third block: 2 (the newest) is preempted, its blocks go to 1
  EXPECT_EQ(o.preempted_ids, (std::vector<int64_t>{2}));
  EXPECT_EQ(counts(o), (Counts{{1, 1}}));
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2, 4}));
  EXPECT_EQ(s.waiting_ids(), (std::vector<int64_t>{2}));
  EXPECT_EQ(s.find_request(2)->status, RequestStatus::kPreempted);
  EXPECT_EQ(s.find_request(2)->num_computed_tokens, 0);
  EXPECT_EQ(s.find_request(2)->num_tokens(), 9);  // keeps its sampled token

  for (int step = 3; step <= 8; ++step) {
    o = d.step();
    EXPECT_EQ(counts(o), (Counts{{1, 1}})) << "step " << step;  // 2 cannot fit yet
  }
  EXPECT_EQ(d.final_status[1], RequestStatus::kFinishedLength);
  o = d.step();  // 2 resumes: recomputes prompt + its first output token
  EXPECT_EQ(o.finished_ids, (std::vector<int64_t>{1}));
  EXPECT_EQ(counts(o), (Counts{{2, 9}}));
  EXPECT_TRUE(o.seqs[0].is_new);
  while (s.has_unfinished_requests()) d.step();
  const V expected{1008, 1009, 1010, 1011, 1012, 1013, 1014, 1015};
  EXPECT_EQ(d.outputs[1], expected);
  EXPECT_EQ(d.outputs[2], expected);  // uninterrupted and preempted sequences agree
  EXPECT_EQ(s.stats().num_preemptions, 1);
  EXPECT_EQ(s.stats().kv.num_blocks_used, 0);
}

TEST(Scheduler, PreemptedRequestsRequeueAtTheHeadInArrivalOrder) {
  Scheduler s(small_config(7, 100, 8));  // 6 usable blocks
  for (int64_t id = 1; id <= 3; ++id) ASSERT_TRUE(s.add_request(make_request(id, iota(8, 0), 12)).ok());
  ASSERT_TRUE(s.add_request(make_request(4, iota(4, 0), 4)).ok());
  Driver d{s};
  EXPECT_EQ(counts(d.step()), (Counts{{1, 8}, {2, 8}, {3, 8}}));  // 4 does not fit
  SchedulerOutput o = d.step();  // 1 and 2 each need a block: 3 is preempted
  EXPECT_EQ(o.preempted_ids, (std::vector<int64_t>{3}));
  EXPECT_EQ(s.waiting_ids(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(counts(o), (Counts{{1, 1}, {2, 1}}));
  int guard = 0;
  while (s.has_unfinished_requests() && ++guard < 200) d.step();
  EXPECT_EQ(d.outputs.size(), 4u);
  for (int64_t id = 1; id <= 3; ++id) EXPECT_EQ(d.outputs[id].size(), 12u) << id;
  EXPECT_EQ(d.outputs[4].size(), 4u);
}

TEST(Scheduler, StaticBatchingHoldsLanesUntilTheWholeBatchEnds) {
  for (SchedulerPolicy policy : {SchedulerPolicy::kContinuous, SchedulerPolicy::kStatic}) {
    SchedulerConfig c = small_config(33, 100, 2);
    c.policy = policy;
    Scheduler s(c);
    ASSERT_TRUE(s.add_request(make_request(1, iota(4, 0), 2)).ok());
    ASSERT_TRUE(s.add_request(make_request(2, iota(4, 0), 6)).ok());
    ASSERT_TRUE(s.add_request(make_request(3, iota(4, 0), 2)).ok());
    Driver d{s};
    std::vector<Counts> steps;
    while (s.has_unfinished_requests()) steps.push_back(counts(d.step()));
    if (policy == SchedulerPolicy::kContinuous) {
      EXPECT_EQ(steps, (std::vector<Counts>{{{1, 4}, {2, 4}}, {{1, 1}, {2, 1}},
                                            {{2, 1}, {3, 4}}, {{2, 1}, {3, 1}}, {{2, 1}}, {{2, 1}}}));
      EXPECT_EQ(s.stats().num_idle_lane_steps, 0);
    } else {
      EXPECT_EQ(steps, (std::vector<Counts>{{{1, 4}, {2, 4}}, {{1, 1}, {2, 1}}, {{2, 1}}, {{2, 1}},
                                            {{2, 1}}, {{2, 1}}, {{3, 4}}, {{3, 1}}}));
      EXPECT_EQ(s.stats().num_idle_lane_steps, 4);
    }
    EXPECT_EQ(d.outputs[2].size(), 6u);
  }
}

TEST(Scheduler, AbortFreesEveryBlock) {
  Scheduler s(small_config(17, 100, 4));
  ASSERT_TRUE(s.add_request(make_request(1, iota(9, 0), 20)).ok());
  ASSERT_TRUE(s.add_request(make_request(2, iota(5, 0), 20)).ok());
  Driver d{s};
  d.step();
  d.step();
  EXPECT_EQ(s.stats().kv.num_blocks_used, 3 + 2);
  EXPECT_TRUE(s.abort_request(1));
  s.check_integrity();
  EXPECT_EQ(s.stats().kv.num_blocks_used, 2);
  EXPECT_FALSE(s.abort_request(1));
  SchedulerOutput o = s.schedule();
  EXPECT_EQ(o.finished_ids, (std::vector<int64_t>{1}));
  EXPECT_EQ(counts(o), (Counts{{2, 1}}));
  s.update_from_output(o, fake_run(o));
  EXPECT_TRUE(s.finish_request(2, RequestStatus::kFinishedStopped));  // a stop string matched
  EXPECT_FALSE(s.has_unfinished_requests());
  EXPECT_EQ(s.stats().kv.num_blocks_used, 0);
  s.check_integrity();
}

TEST(Scheduler, AbortBetweenScheduleAndUpdateIsIgnoredByUpdate) {
  Scheduler s(small_config(17, 100, 4));
  ASSERT_TRUE(s.add_request(make_request(1, iota(5, 0), 4)).ok());
  SchedulerOutput o = s.schedule();
  EXPECT_TRUE(s.abort_request(1));
  EXPECT_TRUE(s.update_from_output(o, fake_run(o)).empty());
  EXPECT_EQ(s.stats().kv.num_blocks_used, 0);
  s.check_integrity();
}

TEST(Scheduler, RefusesRequestsThatCanNeverFit) {
  Scheduler s(small_config(5, 100, 4));  // 4 blocks = 16 slots, max_model_len 64
  Status st = s.add_request(make_request(1, iota(10, 0), 60));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(st.error().message.find("maximum context length 64"), std::string::npos);
  st = s.add_request(make_request(2, iota(9, 0), 8));  // 17 tokens -> 16 slots: 4 blocks, fits
  EXPECT_TRUE(st.ok());
  st = s.add_request(make_request(3, iota(9, 0), 9));  // 18 tokens -> 17 slots: 5 blocks
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(st.error().message.find("the cache has 4"), std::string::npos);
  EXPECT_EQ(s.add_request(make_request(2, iota(3, 0), 1)).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.add_request(make_request(4, {}, 1)).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.add_request(make_request(5, iota(3, 0), 0)).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.num_waiting(), 1);
  SchedulerConfig bad = small_config(5, 32, 4);
  bad.enable_chunked_prefill = false;
  EXPECT_FALSE(validate_scheduler_config(bad).ok());
}

TEST(Scheduler, MaxNumSeqsCapsRunningSequences) {
  Scheduler s(small_config(33, 100, 2));
  for (int64_t id = 1; id <= 3; ++id) ASSERT_TRUE(s.add_request(make_request(id, iota(3, 0), 4)).ok());
  Driver d{s};
  EXPECT_EQ(counts(d.step()), (Counts{{1, 3}, {2, 3}}));
  EXPECT_EQ(s.num_running(), 2);
  EXPECT_EQ(s.num_waiting(), 1);
}

TEST(RequestStatus, OrderAndFinishReasons) {
  EXPECT_FALSE(is_finished(RequestStatus::kWaiting));
  EXPECT_FALSE(is_finished(RequestStatus::kRunning));
  EXPECT_FALSE(is_finished(RequestStatus::kPreempted));
  EXPECT_TRUE(is_finished(RequestStatus::kFinishedStopped));
  EXPECT_STREQ(finish_reason(RequestStatus::kFinishedStopped), "stop");
  EXPECT_STREQ(finish_reason(RequestStatus::kFinishedLength), "length");
  EXPECT_STREQ(finish_reason(RequestStatus::kFinishedAborted), "abort");
  EXPECT_STREQ(finish_reason(RequestStatus::kFinishedError), "error");
  EXPECT_STREQ(finish_reason(RequestStatus::kRunning), "");
  SamplingParams p;
  p.max_tokens = 7;
  p.stop_token_ids = {9};
  const StopParams sp = stop_params_from(p, {2});
  EXPECT_EQ(sp.max_tokens, 7);
  EXPECT_EQ(sp.eos_token_ids, (V{2}));
  EXPECT_EQ(sp.stop_token_ids, (V{9}));
}

}  // namespace
}  // namespace tessera::sched

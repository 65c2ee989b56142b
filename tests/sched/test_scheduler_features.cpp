// Scheduler features: prefix-cache hits, parallel sampling (fork + copy-on-write), speculative
// tokens (scheduled in the chunk, rejected slots released, drafts never cached), stop checks.
#include "sched_test_util.h"

namespace tessera::sched {
namespace {

using namespace testing_util;
using Counts = std::vector<std::pair<int64_t, int32_t>>;

SchedulerConfig config(int32_t num_blocks, bool caching) {
  SchedulerConfig c;
  c.block_size = 4;
  c.num_blocks = num_blocks;
  c.max_num_batched_tokens = 100;
  c.max_num_seqs = 8;
  c.max_model_len = 64;
  c.enable_prefix_caching = caching;
  c.check_integrity_every_step = true;
  return c;
}

TEST(SchedulerFeatures, PrefixHitSkipsTheCachedBlocks) {
  Scheduler s(config(17, true));
  ASSERT_TRUE(s.add_request(make_request(1, iota(10, 10), 1)).ok());
  SchedulerOutput o = s.schedule();
  s.update_from_output(o, fake_run(o));  // finishes after 1 token; blocks 1, 2 cached
  ASSERT_TRUE(s.add_request(make_request(2, iota(10, 10), 1)).ok());
  o = s.schedule();
  EXPECT_EQ(counts(o), (Counts{{2, 2}}));
  EXPECT_EQ(o.seqs[0].start_position, 8);
  EXPECT_EQ(o.seqs[0].token_ids, (V{18, 19}));
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2, 4}));  // cached 1, 2 + the free queue's front
  s.update_from_output(o, fake_run(o));
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.kv.prefix_query_tokens, 20);
  EXPECT_EQ(st.kv.prefix_hit_tokens, 8);
  s.check_integrity();
}

// Two clients send one system prompt at once: the second waits while the first computes the shared
// blocks (those behind it are admitted past it), then starts from the prefix cache. Without prefix
// caching there is nothing to wait for.
TEST(SchedulerFeatures, SharedPromptInFlightIsComputedOnce) {
  V shared = iota(12, 10);  // 3 full blocks of 4
  V a = shared, b = shared;
  a.insert(a.end(), {50, 51});
  b.insert(b.end(), {60, 61, 62});
  for (bool caching : {true, false}) {
    Scheduler s(config(33, caching));
    ASSERT_TRUE(s.add_request(make_request(1, a, 4)).ok());
    ASSERT_TRUE(s.add_request(make_request(2, b, 4)).ok());
    ASSERT_TRUE(s.add_request(make_request(3, iota(6, 200), 4)).ok());
    SchedulerOutput o = s.schedule();
    if (!caching) {
      EXPECT_EQ(counts(o), (Counts{{1, 14}, {2, 15}, {3, 6}}));
      EXPECT_EQ(s.stats().num_prefix_waits, 0);
      continue;
    }
    EXPECT_EQ(counts(o), (Counts{{1, 14}, {3, 6}}));
    EXPECT_EQ(s.waiting_ids(), (std::vector<int64_t>{2}));
    EXPECT_EQ(s.stats().num_prefix_waits, 1);
    s.update_from_output(o, fake_run(o));  // a's 3 full blocks enter the cache
    o = s.schedule();
    EXPECT_EQ(counts(o), (Counts{{1, 1}, {3, 1}, {2, 3}}));
    const ScheduledSeq* second = find_seq(o, 2);
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(second->start_position, 12);
    EXPECT_EQ(second->token_ids, (V{60, 61, 62}));
    EXPECT_EQ(V(second->block_table.begin(), second->block_table.begin() + 3),
              V(find_seq(o, 1)->block_table.begin(), find_seq(o, 1)->block_table.begin() + 3));
    s.update_from_output(o, fake_run(o));
    EXPECT_EQ(s.stats().kv.prefix_hit_tokens, 12);
    EXPECT_EQ(s.stats().num_prefix_waits, 1);
  }
}

TEST(SchedulerFeatures, ParallelSamplingPrefillsOnceThenForks) {
  Scheduler s(config(17, true));
  ASSERT_TRUE(s.add_request(make_request(7, iota(6, 10), 3, /*n=*/3)).ok());
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(counts(o), (Counts{{7, 6}}));
  EXPECT_EQ(o.seqs[0].num_samples, 3);
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2}));
  auto updates = s.update_from_output(o, fake_run(o, [](const ScheduledSeq&) { return V{21, 22, 23}; }));
  ASSERT_EQ(updates.size(), 3u);
  const int64_t child1 = int64_t{1} << 62, child2 = child1 + 1;
  EXPECT_EQ(updates[0].seq_id, child1);
  EXPECT_EQ(updates[0].request_id, 7);
  EXPECT_EQ(updates[0].sample_index, 1);
  EXPECT_EQ(updates[0].new_token_ids, (V{22}));
  EXPECT_EQ(updates[1].seq_id, child2);
  EXPECT_EQ(updates[1].new_token_ids, (V{23}));
  EXPECT_EQ(updates[2].seq_id, 7);
  EXPECT_EQ(updates[2].new_token_ids, (V{21}));
  EXPECT_EQ(s.kv_cache().pool().block(1).ref_cnt, 3);
  EXPECT_EQ(s.kv_cache().pool().block(2).ref_cnt, 3);
  EXPECT_EQ(s.running_ids(), (std::vector<int64_t>{7, child1, child2}));

  o = s.schedule();  // every sample writes position 6 into shared block 2: two copies, one in place
  EXPECT_EQ(counts(o), (Counts{{7, 1}, {child1, 1}, {child2, 1}}));
  ASSERT_EQ(o.cow_copies.size(), 2u);
  EXPECT_EQ(o.cow_copies[0].src_block, 2);
  EXPECT_EQ(o.cow_copies[0].dst_block, 3);
  EXPECT_EQ(o.cow_copies[1].src_block, 2);
  EXPECT_EQ(o.cow_copies[1].dst_block, 4);
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 3}));
  EXPECT_EQ(o.seqs[1].block_table, (V{1, 4}));
  EXPECT_EQ(o.seqs[2].block_table, (V{1, 2}));
  EXPECT_EQ(o.seqs[1].token_ids, (V{22}));
  EXPECT_EQ(s.kv_cache().pool().block(1).ref_cnt, 3);
  s.update_from_output(o, fake_run(o));
  EXPECT_EQ(s.stats().kv.num_cow_copies, 2);
  while (s.has_unfinished_requests()) {
    o = s.schedule();
    s.update_from_output(o, fake_run(o));
  }
  EXPECT_EQ(s.stats().num_finished, 3);
  EXPECT_EQ(s.stats().kv.num_blocks_used, 0);
  s.check_integrity();
}

TEST(SchedulerFeatures, AbortingAParallelRequestAbortsEverySample) {
  Scheduler s(config(17, false));
  ASSERT_TRUE(s.add_request(make_request(7, iota(6, 10), 5, 2)).ok());
  SchedulerOutput o = s.schedule();
  s.update_from_output(o, fake_run(o));
  EXPECT_EQ(s.num_running(), 2);
  EXPECT_TRUE(s.abort_request(7));
  EXPECT_EQ(s.num_running(), 0);
  EXPECT_EQ(s.stats().kv.num_blocks_used, 0);
  EXPECT_EQ(s.schedule().finished_ids.size(), 2u);
  s.check_integrity();
}

TEST(SchedulerFeatures, SpeculativeTokensAreScheduledAndRejectedSlotsReleased) {
  Scheduler s(config(17, true));
  ASSERT_TRUE(s.add_request(make_request(1, iota(4, 10), 20)).ok());
  SchedulerOutput o = s.schedule();
  s.update_from_output(o, fake_run(o, [](const ScheduledSeq&) { return V{40}; }));
  ASSERT_TRUE(s.set_spec_token_ids(1, {7, 8, 9}));

  o = s.schedule();  // the pending token + 3 drafts, one chunk
  ASSERT_EQ(counts(o), (Counts{{1, 4}}));
  EXPECT_EQ(o.seqs[0].token_ids, (V{40, 7, 8, 9}));
  EXPECT_EQ(o.seqs[0].start_position, 4);
  EXPECT_EQ(o.seqs[0].num_spec_tokens, 3);
  EXPECT_TRUE(o.seqs[0].needs_logits);
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2}));
  // Draft 7 accepted, 8 rejected (corrected to 50): positions 4..5 stay, 6..7 are released.
  auto u = s.update_from_output(o, fake_run(o, [](const ScheduledSeq&) { return V{7, 50}; }));
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].new_token_ids, (V{7, 50}));
  Request r = *s.find_request(1);
  EXPECT_EQ(r.num_computed_tokens, 6);
  EXPECT_EQ(all_tokens(r), (V{10, 11, 12, 13, 40, 7, 50}));
  EXPECT_TRUE(r.spec_token_ids.empty());

  ASSERT_TRUE(s.set_spec_token_ids(1, {1, 2, 3, 4, 5}));
  o = s.schedule();  // positions 6..11: a third block for the drafts
  EXPECT_EQ(o.seqs[0].token_ids, (V{50, 1, 2, 3, 4, 5}));
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2, 3}));
  s.update_from_output(o, fake_run(o, [](const ScheduledSeq&) { return V{61}; }));  // all rejected
  EXPECT_EQ(s.find_request(1)->num_computed_tokens, 7);
  EXPECT_EQ(s.kv_cache().block_table(1).size(), 2u);  // block 3 released
  EXPECT_EQ(s.kv_cache().pool().free_queue_order().back(), 3);
  // Drafts never reach the cache: block 2 (positions 4..7) holds 40 7 50 and a rejected draft.
  EXPECT_TRUE(s.kv_cache().pool().block(1).has_hash);
  EXPECT_FALSE(s.kv_cache().pool().block(2).has_hash);

  o = s.schedule();  // computes 61 at position 7: block 2 is full of real tokens, now cached
  EXPECT_EQ(o.seqs[0].token_ids, (V{61}));
  EXPECT_EQ(o.seqs[0].num_spec_tokens, 0);
  s.update_from_output(o, fake_run(o));
  EXPECT_TRUE(s.kv_cache().pool().block(2).has_hash);
  const auto cached = s.kv_cache().pool().cached_tokens(2);
  EXPECT_EQ(V(cached.begin(), cached.end()), (V{40, 7, 50, 61}));
  s.check_integrity();
}

TEST(SchedulerFeatures, SpecTokensRespectTheBudget) {
  SchedulerConfig c = config(17, false);
  c.max_num_batched_tokens = 3;
  Scheduler s(c);
  ASSERT_TRUE(s.add_request(make_request(1, iota(2, 10), 20)).ok());
  SchedulerOutput o = s.schedule();
  s.update_from_output(o, fake_run(o));
  ASSERT_TRUE(s.set_spec_token_ids(1, {7, 8, 9, 6}));
  o = s.schedule();
  EXPECT_EQ(o.seqs[0].token_ids.size(), 3u);  // 1 real + 2 of 4 drafts
  EXPECT_EQ(o.seqs[0].num_spec_tokens, 2);
  auto u = s.update_from_output(o, fake_run(o, [](const ScheduledSeq&) { return V{7, 8, 5}; }));
  EXPECT_EQ(u[0].new_token_ids, (V{7, 8, 5}));
  EXPECT_EQ(s.find_request(1)->num_computed_tokens, 5);
}

TEST(SchedulerFeatures, StopChecks) {
  Scheduler s(config(33, false));
  NewRequest eos = make_request(1, iota(3, 10), 10);
  eos.stop.min_tokens = 2;
  NewRequest stop_id = make_request(2, iota(3, 10), 10);
  stop_id.stop.stop_token_ids = {77};
  NewRequest ignore = make_request(3, iota(3, 10), 3);
  ignore.stop.ignore_eos = true;
  NewRequest spec = make_request(4, iota(3, 10), 3);
  for (auto* r : {&eos, &stop_id, &ignore, &spec}) ASSERT_TRUE(s.add_request(*r).ok());
  std::map<int64_t, V> out;
  std::map<int64_t, RequestStatus> status;
  // Every sequence samples EOS (2), except 2 which samples 77 on its second token.
  int step = 0;
  while (s.has_unfinished_requests() && step < 10) {
    if (step == 1) {
      ASSERT_TRUE(s.set_spec_token_ids(4, {5, 6, 8}));
    }
    SchedulerOutput o = s.schedule();
    auto u = s.update_from_output(o, fake_run(o, [&](const ScheduledSeq& q) {
      if (q.seq_id == 2) return step == 0 ? V{5} : V{77};
      if (q.seq_id == 4 && q.num_spec_tokens > 0) {
        // Drafts past max_tokens are not even scheduled: only 1 of the 3 runs.
        EXPECT_EQ(q.num_spec_tokens, 1);
        return V{5, 9};  // the draft accepted + a bonus token
      }
      return q.seq_id == 4 ? V{4} : V{2};
    }));
    for (auto& x : u) {
      out[x.seq_id].insert(out[x.seq_id].end(), x.new_token_ids.begin(), x.new_token_ids.end());
      status[x.seq_id] = x.status;
    }
    ++step;
  }
  EXPECT_EQ(out[1], (V{2, 2}));  // first EOS ignored (min_tokens 2)
  EXPECT_EQ(status[1], RequestStatus::kFinishedStopped);
  EXPECT_EQ(out[2], (V{5, 77}));
  EXPECT_EQ(status[2], RequestStatus::kFinishedStopped);
  EXPECT_EQ(out[3], (V{2, 2, 2}));
  EXPECT_EQ(status[3], RequestStatus::kFinishedLength);
  EXPECT_EQ(out[4], (V{4, 5, 9}));
  EXPECT_EQ(status[4], RequestStatus::kFinishedLength);
  EXPECT_EQ(s.stats().kv.num_blocks_used, 0);
}

}  // namespace
}  // namespace tessera::sched

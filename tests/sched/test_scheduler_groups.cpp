// The scheduler over KV-cache groups (a full group and a sliding group of window 8, blocks of 4
// tokens): every scheduled sequence carries both groups' tables, the sliding group's entries
// behind its window become the null block as the sequence advances (and those blocks serve the
// next allocation), and the admission rule counts a sliding group by its window, not its length.
#include <map>

#include "sched_test_util.h"

namespace tessera::sched {
namespace {

using namespace testing_util;

SchedulerConfig two_group_config(int32_t num_blocks) {
  SchedulerConfig c;
  c.block_size = 4;
  c.num_blocks = num_blocks;
  c.max_num_batched_tokens = 8;
  c.max_num_seqs = 4;
  c.max_model_len = 64;
  c.enable_prefix_caching = false;
  c.kv_group_windows = {0, 8};
  c.check_integrity_every_step = true;
  return c;
}

SchedulerOutput step(Scheduler& s) {
  SchedulerOutput out = s.schedule();
  s.update_from_output(out, fake_run(out));
  s.check_integrity();
  return out;
}

TEST(SchedulerGroups, TablesOfBothGroupsWithTheWindowReleased) {
  Scheduler s(two_group_config(40));
  ASSERT_TRUE(s.add_request(make_request(1, iota(20, 10), 3)).ok());

  SchedulerOutput o = step(s);  // positions [0, 8): group 0 [1 2], group 1 [3 4]
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2, 3, 4}));
  o = step(s);  // [8, 16): the window of position 8 starts at 1, inside entry 0: nothing released
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2, 5, 6, 3, 4, 7, 8}));
  o = step(s);  // [16, 20): the window of position 16 starts at 9: entries 0 and 1 released
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2, 5, 6, 9, 0, 0, 7, 8, 10}));
  EXPECT_EQ(s.stats().kv.num_window_releases, 2);
  o = step(s);  // decode at position 20: the window starts at 13, entry 2 (block 7) released
  EXPECT_EQ(o.seqs[0].start_position, 20);
  EXPECT_EQ(o.seqs[0].block_table, (V{1, 2, 5, 6, 9, 11, 0, 0, 0, 8, 10, 12}));
  EXPECT_EQ(s.stats().kv.group_blocks_used, (V{6, 3}));
  while (s.has_unfinished_requests()) step(s);
  EXPECT_EQ(s.stats().kv.num_blocks_used, 0);
}

// Prompt 20 + max_tokens 5: 24 cached positions. Full group ceil(24 / 4) = 6 blocks; the sliding
// group at most ceil((8 - 1 + 8) / 4) + 1 = 5 (its window plus a step of the budget's 8 tokens),
// so 11 blocks. A cache of 11 usable blocks admits it (and it runs to the end alone, however the
// steps fall); one of 10 refuses it at add_request.
TEST(SchedulerGroups, AdmissionCountsTheSlidingGroupByItsWindow) {
  const V windows = {0, 8};
  EXPECT_EQ(max_kv_blocks_of_request(20, 5, KvBlockRule{4, windows, 8}), 11);
  EXPECT_EQ(Scheduler(two_group_config(12)).kv_block_rule().max_tokens_per_step, 8);
  Scheduler refused(two_group_config(11));  // 10 usable
  EXPECT_FALSE(refused.add_request(make_request(1, iota(20, 10), 5)).ok());

  Scheduler s(two_group_config(12));  // 11 usable
  ASSERT_TRUE(s.add_request(make_request(1, iota(20, 10), 5)).ok());
  ASSERT_TRUE(s.add_request(make_request(2, iota(20, 40), 5)).ok());  // competes for the blocks
  std::map<int64_t, int32_t> generated;
  for (int32_t i = 0; i < 200 && s.has_unfinished_requests(); ++i) {
    SchedulerOutput out = s.schedule();
    for (const RequestUpdate& u : s.update_from_output(out, fake_run(out))) {
      generated[u.seq_id] += static_cast<int32_t>(u.new_token_ids.size());
    }
    s.check_integrity();
  }
  EXPECT_FALSE(s.has_unfinished_requests());
  EXPECT_EQ(generated[1], 5);
  EXPECT_EQ(generated[2], 5);
  EXPECT_GT(s.stats().num_preemptions, 0);  // 11 blocks hold one of them at a time, not both
}

}  // namespace
}  // namespace tessera::sched

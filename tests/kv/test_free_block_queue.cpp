// FreeBlockQueue: exact order after push, pop and O(1) removal from the middle.
#include <gtest/gtest.h>

#include "kv/free_block_queue.h"

namespace tessera::kv {
namespace {

using V = std::vector<int32_t>;

TEST(FreeBlockQueue, PushPopRemoveKeepOrder) {
  FreeBlockQueue q(8);
  EXPECT_TRUE(q.empty());
  for (int32_t id : {3, 1, 4, 5, 0}) q.push_back(id);
  EXPECT_EQ(q.to_vector(), (V{3, 1, 4, 5, 0}));
  q.remove(4);  // middle
  EXPECT_EQ(q.to_vector(), (V{3, 1, 5, 0}));
  q.remove(0);  // back
  q.remove(3);  // front
  EXPECT_EQ(q.to_vector(), (V{1, 5}));
  EXPECT_EQ(q.front(), 1);
  EXPECT_EQ(q.pop_front(), 1);
  q.push_back(3);
  EXPECT_EQ(q.to_vector(), (V{5, 3}));
  EXPECT_TRUE(q.contains(5));
  EXPECT_FALSE(q.contains(1));
  EXPECT_EQ(q.size(), 2);
  EXPECT_EQ(q.pop_front(), 5);
  EXPECT_EQ(q.pop_front(), 3);
  EXPECT_TRUE(q.empty());
}

TEST(FreeBlockQueueDeathTest, DoublePushAborts) {
  FreeBlockQueue q(4);
  q.push_back(2);
  EXPECT_DEATH(q.push_back(2), "already in the free queue");
  EXPECT_DEATH(q.remove(1), "not in the free queue");
}

}  // namespace
}  // namespace tessera::kv

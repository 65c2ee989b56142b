// Randomized, with KV-cache groups (full + sliding windows): allocate / prefill chunks / decode /
// speculate + truncate / fork / free / prefix hits, checked after every operation against a
// readable reference of the table rules (Ref below) and a fake KV store: every slot handed out is
// "written" with the token at that position (CoW copies copy slots), and every position a future
// query can still see must read back its own token through its group's table. Plus
// check_integrity(), kv_blocks_held == num_blocks_held, and "nullopt changes nothing".
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kv/kv_cache_manager.h"
#include "kv/kv_plan.h"

namespace tessera::kv {
namespace {

// The rules, one line each: a group's table covers positions [0, allocated) in
// ceil(allocated / bs) entries; a sliding group's leading entries are null up to
// floor(max(0, c - W + 1) / bs) for the largest c an allocation was made at (or the hit length).
struct Ref {
  std::vector<int32_t> windows;
  int32_t bs;
  int32_t released(int32_t g, int32_t c) const {
    const int32_t w = windows[static_cast<size_t>(g)];
    return w == 0 ? 0 : std::max(0, c - w + 1) / bs;
  }
  int32_t entries(int32_t allocated) const { return (allocated + bs - 1) / bs; }
};

struct SimSeq {
  std::vector<int32_t> tokens;  // known tokens (computed + at most one pending)
  std::vector<BlockHash> hashes;
  int32_t num_computed = 0;
  int32_t release_at = 0;  // the largest num_computed an allocation was made at (Ref::released)
  uint64_t extra_key = 0;
};

class GroupSim {
 public:
  GroupSim(int32_t num_blocks, int32_t bs, std::vector<int32_t> windows, uint32_t seed)
      : kv_(config(num_blocks, bs, windows)),
        ref_{windows, bs},
        store_(static_cast<size_t>(num_blocks) * static_cast<size_t>(bs), -1),
        rng_(seed) {}

  static KvCacheConfig config(int32_t num_blocks, int32_t bs, const std::vector<int32_t>& windows) {
    KvCacheConfig c{.num_blocks = num_blocks, .block_size = bs, .enable_prefix_caching = true,
                    .record_block_events = true};  // exercises records with released parents
    for (int32_t w : windows) c.groups.push_back({.sliding_window = w});
    return c;
  }
  int32_t groups() const { return static_cast<int32_t>(ref_.windows.size()); }
  int32_t rand(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }
  SeqTokens view(int64_t id) {
    SimSeq& s = seqs_.at(id);
    return {id, s.tokens, s.hashes, s.extra_key};
  }
  int32_t& slot(int32_t block, int32_t p) {
    return store_[static_cast<size_t>(block) * static_cast<size_t>(ref_.bs) + static_cast<size_t>(p % ref_.bs)];
  }
  void write(int64_t id, int32_t p, int32_t token) {
    for (int32_t g = 0; g < groups(); ++g) {
      auto t = kv_.block_table(id, g);
      ASSERT_LT(static_cast<size_t>(p / ref_.bs), t.size());
      ASSERT_NE(t[static_cast<size_t>(p / ref_.bs)], kNullBlockId) << "write into a released block";
      slot(t[static_cast<size_t>(p / ref_.bs)], p) = token;
    }
  }
  std::vector<std::vector<int32_t>> tables(int64_t id) const {
    std::vector<std::vector<int32_t>> out;
    for (int32_t g = 0; g < groups(); ++g) {
      auto t = kv_.block_table(id, g);
      out.emplace_back(t.begin(), t.end());
    }
    return out;
  }

  // Allocates and "computes" n slots from num_computed; the tokens written are `tokens`.
  bool alloc(int64_t id, int32_t n, const PrefixHit* hit) {
    SimSeq& s = seqs_.at(id);
    const auto before = tables(id);
    const int32_t free_before = kv_.num_free_blocks();
    auto a = kv_.allocate_slots(id, s.num_computed, n, hit);
    if (!a) {
      EXPECT_EQ(tables(id), before);
      EXPECT_EQ(kv_.num_free_blocks(), free_before);
      return false;
    }
    EXPECT_EQ(kv_.num_blocks_held(id), kv_blocks_held(ref_.windows, ref_.bs, s.num_computed, s.num_computed + n));
    s.release_at = std::max(s.release_at, s.num_computed);
    for (const CowCopy& c : a->cow_copies) {
      for (int32_t i = 0; i < ref_.bs; ++i) slot(c.dst_block, i) = slot(c.src_block, i);
      ++num_cow_;
    }
    return true;
  }

  bool compute(int64_t id, int32_t n, const PrefixHit* hit) {
    SimSeq& s = seqs_.at(id);
    if (!alloc(id, n, hit)) return false;
    for (int32_t p = s.num_computed; p < s.num_computed + n; ++p) write(id, p, s.tokens[static_cast<size_t>(p)]);
    s.num_computed += n;
    kv_.cache_blocks(view(id), s.num_computed);
    return true;
  }

  void new_seq() {
    const int64_t id = next_id_++;
    SimSeq s;
    const int32_t templ = rand(0, 2);
    const int32_t shared = rand(0, 6 * ref_.bs);
    for (int32_t i = 0; i < shared; ++i) s.tokens.push_back(1000 * templ + i);
    const int32_t own = rand(1, 2 * ref_.bs);
    for (int32_t i = 0; i < own; ++i) s.tokens.push_back(rand(0, 5));
    s.extra_key = rand(0, 4) == 0 ? hash_cache_salt("salt") : 0;
    extend_block_hashes(s.hashes, s.tokens, ref_.bs, s.extra_key);
    seqs_[id] = std::move(s);
    const PrefixHit hit = kv_.get_computed_blocks(view(id));
    SimSeq& q = seqs_[id];
    EXPECT_LT(hit.num_tokens, static_cast<int32_t>(q.tokens.size()));
    EXPECT_EQ(hit.num_tokens % ref_.bs, 0);
    // The hit is real where a query can see it, and null exactly where the window released it.
    for (int32_t g = 0; g < groups(); ++g) {
      auto blocks = kv_.hit_blocks(hit, g);
      const int32_t nulls = ref_.released(g, hit.num_tokens);
      for (int32_t b = 0; b < static_cast<int32_t>(blocks.size()); ++b) {
        ASSERT_EQ(blocks[static_cast<size_t>(b)] == kNullBlockId, b < nulls) << "group " << g << " block " << b;
      }
      for (int32_t p = nulls * ref_.bs; p < hit.num_tokens; ++p) {
        EXPECT_EQ(slot(blocks[static_cast<size_t>(p / ref_.bs)], p), q.tokens[static_cast<size_t>(p)]);
      }
    }
    q.num_computed = hit.num_tokens;
    const int32_t remaining = static_cast<int32_t>(q.tokens.size()) - hit.num_tokens;
    if (!compute(id, rand(1, remaining), &hit)) {
      EXPECT_FALSE(kv_.contains(id));
      seqs_.erase(id);
    }
    num_hit_tokens_ += hit.num_tokens;
  }

  int64_t pick() {
    auto it = seqs_.begin();
    std::advance(it, rand(0, static_cast<int32_t>(seqs_.size()) - 1));
    return it->first;
  }

  void step(int64_t id) {
    SimSeq& s = seqs_.at(id);
    const int32_t known = static_cast<int32_t>(s.tokens.size());
    if (s.num_computed < known) {
      compute(id, rand(1, known - s.num_computed), nullptr);
      return;
    }
    s.tokens.push_back(rand(0, 5));
    extend_block_hashes(s.hashes, s.tokens, ref_.bs, s.extra_key);
  }

  void speculate(int64_t id) {
    SimSeq& s = seqs_.at(id);
    if (s.num_computed + 1 != static_cast<int32_t>(s.tokens.size())) return;
    const int32_t k = rand(1, 4);
    if (!alloc(id, 1 + k, nullptr)) return;
    write(id, s.num_computed, s.tokens.back());
    std::vector<int32_t> drafts;
    for (int32_t i = 0; i < k; ++i) drafts.push_back(rand(0, 5));
    for (int32_t i = 0; i < k; ++i) write(id, s.num_computed + 1 + i, drafts[static_cast<size_t>(i)]);
    const int32_t accepted = rand(0, k);
    for (int32_t i = 0; i < accepted; ++i) s.tokens.push_back(drafts[static_cast<size_t>(i)]);
    s.num_computed += 1 + accepted;
    s.tokens.push_back(rand(0, 5));
    extend_block_hashes(s.hashes, s.tokens, ref_.bs, s.extra_key);
    kv_.truncate(id, s.num_computed);
    kv_.cache_blocks(view(id), s.num_computed);
  }

  void check() {
    kv_.check_integrity();
    for (const BlockEvent& e : kv_.drain_block_events()) {
      ASSERT_TRUE(e.kind != BlockEventKind::kStored || static_cast<int32_t>(e.token_ids.size()) == ref_.bs);
    }
    int32_t held = 0;
    for (auto& [id, s] : seqs_) {
      for (int32_t g = 0; g < groups(); ++g) {
        auto t = kv_.block_table(id, g);
        ASSERT_EQ(static_cast<int32_t>(t.size()), ref_.entries(s.num_computed)) << "sequence " << id;
        const int32_t nulls = ref_.released(g, s.release_at);
        for (int32_t b = 0; b < static_cast<int32_t>(t.size()); ++b) {
          ASSERT_EQ(t[static_cast<size_t>(b)] == kNullBlockId, b < nulls) << "seq " << id << " group " << g;
        }
        // Every position the next query (at num_computed) can see reads back its token.
        const int32_t w = ref_.windows[static_cast<size_t>(g)];
        const int32_t lo = w == 0 ? 0 : std::max(0, s.num_computed - w + 1);
        ASSERT_LE(nulls * ref_.bs, lo);
        for (int32_t p = lo; p < s.num_computed; ++p) {
          ASSERT_EQ(slot(t[static_cast<size_t>(p / ref_.bs)], p), s.tokens[static_cast<size_t>(p)])
              << "sequence " << id << " group " << g << " position " << p;
        }
      }
      held += kv_.num_blocks_held(id);
    }
    const KvCacheStats st = kv_.stats();
    int32_t used = 0;
    for (int32_t n : st.group_blocks_used) used += n;
    ASSERT_EQ(used, st.num_blocks_used);
    ASSERT_LE(st.num_blocks_used, held);  // forks share blocks
    ASSERT_EQ(st.num_cow_copies, num_cow_);
  }

  void run(int32_t num_ops) {
    for (int32_t op = 0; op < num_ops; ++op) {
      const int32_t r = rand(0, 99);
      if (seqs_.empty() || r < 12) {
        new_seq();
      } else if (r < 65) {
        step(pick());
      } else if (r < 77) {
        speculate(pick());
      } else if (r < 83) {
        if (seqs_.size() < 10) {
          const int64_t parent = pick();
          const int64_t child = next_id_++;
          seqs_[child] = seqs_.at(parent);
          kv_.fork(parent, child);
        }
      } else if (r < 90 || kv_.num_free_blocks() == 0) {
        const int64_t id = pick();
        kv_.free(id);
        seqs_.erase(id);
      } else {
        step(pick());
      }
      check();
      if (testing::Test::HasFatalFailure()) return;
      ++num_ops_done_;
    }
  }

  KvCacheManager kv_;
  Ref ref_;
  std::vector<int32_t> store_;  // [num_blocks * block_size] fake KV: the token at each slot
  std::map<int64_t, SimSeq> seqs_;
  std::mt19937 rng_;
  int64_t next_id_ = 1;
  int64_t num_cow_ = 0;
  int64_t num_hit_tokens_ = 0;
  int64_t num_ops_done_ = 0;
};

TEST(KvGroupsRandom, ThousandsOfOperationsFollowTheGroupRules) {
  const std::vector<std::vector<int32_t>> layouts = {{0, 8}, {0, 5, 0}, {13}, {0, 1}};
  for (uint32_t seed : {1u, 2u}) {
    for (int32_t bs : {1, 4, 16}) {
      for (size_t l = 0; l < layouts.size(); ++l) {
        GroupSim sim(48, bs, layouts[l], seed * 1000 + static_cast<uint32_t>(bs * 10 + l));
        sim.run(3000);
        ASSERT_EQ(sim.num_ops_done_, 3000) << "seed " << seed << " bs " << bs << " layout " << l;
        const KvCacheStats st = sim.kv_.stats();
        EXPECT_GT(st.prefix_hit_tokens, 0) << "seed " << seed << " bs " << bs << " layout " << l;
        EXPECT_GT(st.num_window_releases, 0) << "seed " << seed << " bs " << bs << " layout " << l;
        for (auto it = sim.seqs_.begin(); it != sim.seqs_.end();) {
          sim.kv_.free(it->first);
          it = sim.seqs_.erase(it);
        }
        sim.check();
        EXPECT_EQ(sim.kv_.stats().num_blocks_used, 0);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::kv

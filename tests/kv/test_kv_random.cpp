// Randomized: thousands of allocate / append / speculate / fork / free / prefix-hit operations
// against a model of the expected state. The model is a fake KV store: every slot the manager hands
// out is "written" with the token id at that position, CoW copies copy slots, and after every
// operation each sequence's computed positions must read back its own tokens through its block
// table. That catches a wrong prefix hit, a missed copy-on-write, a block shared when it should not
// be, and a block freed while still in use. Also: table size == ceil(computed / block_size) (on-
// demand allocation, waste < one block) and check_integrity() after each operation.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kv/kv_cache_manager.h"

namespace tessera::kv {
namespace {

struct SimSeq {
  std::vector<int32_t> tokens;          // known tokens (computed ones + at most one pending)
  std::vector<BlockHash> hashes;
  int32_t num_computed = 0;
  uint64_t extra_key = 0;
};

class Sim {
 public:
  Sim(int32_t num_blocks, int32_t block_size, bool caching, uint32_t seed)
      : kv_({num_blocks, block_size, caching}),
        bs_(block_size),
        store_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size), -1),
        rng_(seed) {}

  int32_t rand(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }

  SeqTokens view(int64_t id) {
    SimSeq& s = seqs_.at(id);
    return {id, s.tokens, s.hashes, s.extra_key};
  }

  void write(int64_t id, int32_t position, int32_t token) {
    auto table = kv_.block_table(id);
    const size_t b = static_cast<size_t>(position / bs_);
    ASSERT_LT(b, table.size());
    store_[static_cast<size_t>(table[b]) * bs_ + position % bs_] = token;
  }

  void apply(const SlotAllocation& a) {
    for (const CowCopy& c : a.cow_copies) {
      std::copy_n(store_.begin() + static_cast<ptrdiff_t>(c.src_block) * bs_, bs_,
                  store_.begin() + static_cast<ptrdiff_t>(c.dst_block) * bs_);
      ++num_cow_;
    }
  }

  // Computes `n` known tokens of sequence id (the chunk of a prefill or the pending token).
  bool compute(int64_t id, int32_t n, const PrefixHit* hit) {
    SimSeq& s = seqs_.at(id);
    auto a = kv_.allocate_slots(id, s.num_computed, n, hit);
    if (!a) return false;
    apply(*a);
    for (int32_t p = s.num_computed; p < s.num_computed + n; ++p) write(id, p, s.tokens[p]);
    s.num_computed += n;
    kv_.cache_blocks(view(id), s.num_computed);
    return true;
  }

  void new_seq() {
    const int64_t id = next_id_++;
    SimSeq s;
    // Prompts share prefixes drawn from three templates so prefix hits are frequent.
    const int32_t templ = rand(0, 2);
    const int32_t shared = rand(0, 3 * bs_);
    for (int32_t i = 0; i < shared; ++i) s.tokens.push_back(1000 * templ + i);
    const int32_t own = rand(1, 2 * bs_);
    for (int32_t i = 0; i < own; ++i) s.tokens.push_back(rand(0, 5));
    s.extra_key = rand(0, 4) == 0 ? hash_cache_salt("salt") : 0;
    extend_block_hashes(s.hashes, s.tokens, bs_, s.extra_key);
    seqs_[id] = std::move(s);
    const PrefixHit hit = kv_.get_computed_blocks(view(id));
    EXPECT_LT(hit.num_tokens, static_cast<int32_t>(seqs_[id].tokens.size()));
    // The hit must be real: its blocks hold exactly this sequence's tokens.
    for (int32_t p = 0; p < hit.num_tokens; ++p) {
      EXPECT_EQ(store_[static_cast<size_t>(hit.block_ids[p / bs_]) * bs_ + p % bs_],
                seqs_[id].tokens[p]);
    }
    seqs_[id].num_computed = hit.num_tokens;
    const int32_t remaining = static_cast<int32_t>(seqs_[id].tokens.size()) - hit.num_tokens;
    const int32_t free_before = kv_.num_free_blocks();
    if (!compute(id, rand(1, remaining), &hit)) {
      EXPECT_FALSE(kv_.contains(id));
      EXPECT_EQ(kv_.num_free_blocks(), free_before);
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
    if (s.num_computed < known) {  // chunked prefill, or the pending sampled token
      const std::vector<int32_t> before(kv_.block_table(id).begin(), kv_.block_table(id).end());
      if (!compute(id, rand(1, known - s.num_computed), nullptr)) {
        EXPECT_EQ(std::vector<int32_t>(kv_.block_table(id).begin(), kv_.block_table(id).end()),
                  before);
      }
      return;
    }
    s.tokens.push_back(rand(0, 5));  // "sampled" token, computed next step
    extend_block_hashes(s.hashes, s.tokens, bs_, s.extra_key);
  }

  // Speculation: the pending token plus k drafts are computed, a of them accepted.
  void speculate(int64_t id) {
    SimSeq& s = seqs_.at(id);
    if (s.num_computed + 1 != static_cast<int32_t>(s.tokens.size())) return;
    const int32_t k = rand(1, 4);
    std::vector<int32_t> drafts;
    for (int32_t i = 0; i < k; ++i) drafts.push_back(rand(0, 5));
    auto a = kv_.allocate_slots(id, s.num_computed, 1 + k);
    if (!a) return;
    apply(*a);
    write(id, s.num_computed, s.tokens.back());
    for (int32_t i = 0; i < k; ++i) write(id, s.num_computed + 1 + i, drafts[i]);
    const int32_t accepted = rand(0, k);
    for (int32_t i = 0; i < accepted; ++i) s.tokens.push_back(drafts[i]);
    s.num_computed += 1 + accepted;
    s.tokens.push_back(rand(0, 5));  // bonus / corrected token, not computed yet
    extend_block_hashes(s.hashes, s.tokens, bs_, s.extra_key);
    kv_.truncate(id, s.num_computed);
    kv_.cache_blocks(view(id), s.num_computed);
  }

  void fork(int64_t id) {
    const int64_t child = next_id_++;
    seqs_[child] = seqs_.at(id);
    kv_.fork(id, child);
  }

  void free(int64_t id) {
    kv_.free(id);
    seqs_.erase(id);
  }

  void check() {
    kv_.check_integrity();
    for (auto& [id, s] : seqs_) {
      auto table = kv_.block_table(id);
      ASSERT_EQ(static_cast<int32_t>(table.size()), kv_.num_blocks_for_tokens(s.num_computed))
          << "sequence " << id;
      for (int32_t p = 0; p < s.num_computed; ++p) {
        ASSERT_EQ(store_[static_cast<size_t>(table[p / bs_]) * bs_ + p % bs_], s.tokens[p])
            << "sequence " << id << " position " << p;
      }
    }
    const KvCacheStats st = kv_.stats();
    ASSERT_EQ(st.num_blocks_free + st.num_blocks_cached + st.num_blocks_used, st.num_blocks_total);
    ASSERT_EQ(st.num_cow_copies, num_cow_);
  }

  void run(int32_t num_ops) {
    for (int32_t op = 0; op < num_ops; ++op) {
      const int32_t r = rand(0, 99);
      if (seqs_.empty() || r < 15) {
        new_seq();
      } else if (r < 60) {
        step(pick());
      } else if (r < 72) {
        speculate(pick());
      } else if (r < 80) {
        if (seqs_.size() < 12) fork(pick());
      } else if (r < 90 || kv_.num_free_blocks() == 0) {
        free(pick());
      } else {
        step(pick());
      }
      check();
      if (testing::Test::HasFatalFailure()) return;
      ++num_ops_done_;
    }
  }

  KvCacheManager kv_;
  int32_t bs_;
  std::vector<int32_t> store_;  // [num_blocks * block_size] fake KV: the token at each slot
  std::map<int64_t, SimSeq> seqs_;
  std::mt19937 rng_;
  int64_t next_id_ = 1;
  int64_t num_cow_ = 0;
  int64_t num_hit_tokens_ = 0;
  int64_t num_ops_done_ = 0;
};

TEST(KvRandom, ThousandsOfOperationsKeepEveryInvariant) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    for (int32_t block_size : {1, 4, 16}) {
      Sim sim(16, block_size, true, seed * 100 + block_size);
      sim.run(5000);
      EXPECT_EQ(sim.num_ops_done_, 5000);
      ASSERT_FALSE(testing::Test::HasFatalFailure()) << "seed " << seed << " bs " << block_size;
      const KvCacheStats st = sim.kv_.stats();
      EXPECT_GT(st.prefix_hit_tokens, 0) << "seed " << seed << " bs " << block_size;
      if (block_size > 1) {
        EXPECT_GT(st.num_cow_copies, 0) << "seed " << seed << " bs " << block_size;
      }
      EXPECT_GT(st.num_evictions, 0) << "seed " << seed << " bs " << block_size;
      for (auto it = sim.seqs_.begin(); it != sim.seqs_.end();) sim.free((it++)->first);
      sim.check();
      EXPECT_EQ(sim.kv_.stats().num_blocks_used, 0);
    }
  }
}

TEST(KvRandom, PrefixCachingOffKeepsEveryInvariant) {
  Sim sim(12, 4, false, 77);
  sim.run(3000);
  EXPECT_EQ(sim.num_ops_done_, 3000);
  EXPECT_EQ(sim.kv_.stats().prefix_hit_tokens, 0);
  EXPECT_GT(sim.kv_.stats().num_cow_copies, 0);
}

}  // namespace
}  // namespace tessera::kv

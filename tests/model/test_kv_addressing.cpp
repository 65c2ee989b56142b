// How a batch addresses the paged KV cache per KV-cache group: ForwardBatchBuilder's slots and
// CSR block tables from group-major tables (exact values), padding lanes in every group, and
// KvStorage's layer slots (layers of different groups share a slot's tensors, a block's bytes
// are num_slots layers', copy_block copies every slot).
#include <gtest/gtest.h>

#include <cstring>

#include "model/forward_batch.h"
#include "model/kv_storage.h"

namespace tessera {
namespace {

using V = std::vector<int32_t>;

V csr(const kernels::AttnMetadata& md, int32_t seq) {
  return V(md.block_table_indices + md.block_table_indptr[seq], md.block_table_indices + md.block_table_indptr[seq + 1]);
}

TEST(KvAddressing, BuilderGivesEachGroupItsSlotsAndTables) {
  ForwardBatchBuilder b;
  b.reserve(16, 4, 8, /*num_groups=*/2);
  // Sequence 1: 3 tokens at positions 5..7, block size 4. Group 0 [7 8]; group 1 [0 9] (its
  // entry 0 released behind a window).
  b.add_chunk(1, V{11, 12, 13}, 5, V{7, 8, 0, 9}, 4, 1);
  b.add_chunk(2, V{21}, 0, V{3, 4}, 4, 1);  // one token at position 0: group 0 [3], group 1 [4]
  b.add_padding_lane();
  const ForwardBatch batch = b.batch();
  ASSERT_EQ(batch.group_attn.size(), 2u);
  EXPECT_EQ(batch.attn.slot_mapping, batch.group_attn[0].slot_mapping);
  const kernels::AttnMetadata& g0 = batch.attn_of_group(0);
  const kernels::AttnMetadata& g1 = batch.attn_of_group(1);
  EXPECT_EQ(std::vector<int64_t>(g0.slot_mapping, g0.slot_mapping + 5), (std::vector<int64_t>{33, 34, 35, 12, -1}));
  EXPECT_EQ(std::vector<int64_t>(g1.slot_mapping, g1.slot_mapping + 5), (std::vector<int64_t>{37, 38, 39, 16, -1}));
  EXPECT_EQ(csr(g0, 0), (V{7, 8}));
  EXPECT_EQ(csr(g1, 0), (V{0, 9}));
  EXPECT_EQ(csr(g0, 1), (V{3}));
  EXPECT_EQ(csr(g1, 1), (V{4}));
  EXPECT_EQ(csr(g1, 2), (V{0}));  // the pad lane reads the null block
  EXPECT_EQ(V(g1.seq_lens, g1.seq_lens + 3), (V{8, 1, 1}));
  EXPECT_EQ(V(batch.logits_rows.begin(), batch.logits_rows.end()), (V{2, 3, 4}));
  // A table that does not split into the groups is a checked error.
  EXPECT_DEATH(b.add_chunk(3, V{1}, 0, V{5, 6, 7}, 4, 0), "table entries");
}

TEST(KvAddressing, StorageSharesSlotsBetweenGroups) {
  ModelConfig c;
  c.num_layers = 3;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.sliding_window = 16;
  c.layer_local = {1, 1, 0};
  // Layers 0 and 1 local (groups 1 and 2), layer 2 global (group 0): one slot per block.
  KvStorage kv(c, 10, 4, kernels::KvDType::kF32, KvSlotMap{{1, 2, 0}, {0, 0, 0}, 1});
  EXPECT_EQ(kv.num_slots(), 1);
  EXPECT_EQ(kv.num_groups(), 3);
  EXPECT_EQ(kv.group_of(0), 1);
  EXPECT_EQ(kv.group_of(2), 0);
  EXPECT_EQ(kv.layer(0).k, kv.layer(2).k);
  EXPECT_EQ(kv.layer(0).window, 16);
  EXPECT_EQ(kv.layer(2).window, 0);
  EXPECT_EQ(kv.bytes(), size_t{10} * 4 * 8 * sizeof(float) * 2);  // 1 slot: K and V of 10 blocks
  KvStorage all(c, 10, 4, kernels::KvDType::kF32);                // default: slot = layer
  EXPECT_EQ(all.num_slots(), 3);
  EXPECT_EQ(all.num_groups(), 1);
  EXPECT_NE(all.layer(0).k, all.layer(2).k);
  EXPECT_EQ(all.bytes(), 3 * kv.bytes());

  // Two slots: copy_block copies a block in every slot, K and V.
  KvStorage two(c, 10, 4, kernels::KvDType::kF32, KvSlotMap{{0, 0, 1}, {0, 1, 0}, 2});
  for (int32_t l : {0, 1}) {
    auto* k = static_cast<float*>(two.layer(l).k);
    auto* v = static_cast<float*>(two.layer(l).v);
    for (int32_t i = 0; i < 32; ++i) {  // block 3 = elements [96, 128) of each tensor
      k[96 + i] = static_cast<float>(l * 100 + i);
      v[96 + i] = static_cast<float>(l * 100 + i + 50);
    }
  }
  two.copy_block(3, 6);
  for (int32_t l : {0, 1}) {
    const auto* k = static_cast<const float*>(two.layer(l).k);
    const auto* v = static_cast<const float*>(two.layer(l).v);
    EXPECT_EQ(std::memcmp(k + 96, k + 192, 32 * sizeof(float)), 0) << "layer " << l;
    EXPECT_EQ(std::memcmp(v + 96, v + 192, 32 * sizeof(float)), 0) << "layer " << l;
  }
  EXPECT_EQ(two.layer(2).k, two.layer(0).k);  // layer 2 (group 1) shares slot 0 with layer 0
}

}  // namespace
}  // namespace tessera

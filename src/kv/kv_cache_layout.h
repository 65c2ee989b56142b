// KvCacheLayout: how a model's layers share the paged KV cache when some of them attend only to a
// sliding window (Gemma 3: 5 local layers of every 6). The design is vLLM's hybrid allocator:
//
//   * layers are split into KV-cache groups of one window each (0 = full attention), every group
//     the same number of layers (`num_slots`, the smallest count of any window type, so no
//     group is larger than another; a type's last group may be short and leaves slots unused);
//   * every block of the one BlockPool holds `num_slots` layers' K and V ("slots"); a block that
//     belongs to group g holds the K/V of g's layers, layer l in slot layer_slot[l];
//   * each sequence has one block table per group (KvCacheManager), and a sliding group gives its
//     blocks back once every query has passed them.
//
// Gemma-3-270M (18 layers, layers 5, 11, 17 global, the rest with a 512-token window):
//   group 0: window 0   layers  5 11 17        slots 0 1 2
//   group 1: window 512 layers  0  1  2        slots 0 1 2
//   ...
//   group 5: window 512 layers 14 15 16        slots 0 1 2       num_slots 3: a block is 3 layers
// A model without windows is one full group of all layers (slot = layer: the single-table layout).
// Pure integers: kv/ knows nothing of the model; the engine passes the model's per-layer windows.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace tessera::kv {

struct KvCacheLayout {
  std::vector<int32_t> group_windows;  // [num_groups] tokens a query sees in group g, 0 = full
  std::vector<int32_t> layer_group;    // [num_layers] the group of each layer
  std::vector<int32_t> layer_slot;     // [num_layers] its slot within a block of that group
  int32_t num_slots = 0;               // layers' K/V one block holds

  int32_t num_groups() const { return static_cast<int32_t>(group_windows.size()); }
  int32_t num_layers() const { return static_cast<int32_t>(layer_group.size()); }
};

// The layout for layers with these windows ([num_layers], 0 = full attention). With one window
// value for every layer, one group of all layers with that window (a uniform sliding window still
// frees blocks). With several: groups of one window each as above when `hybrid`; otherwise
// (vLLM's --disable-hybrid-kv-cache-manager) one full group of all layers, every block kept
// (the attention kernels still skip keys outside a layer's window). Full groups come first, then
// the sliding groups in layer order. Empty windows: an empty layout.
KvCacheLayout plan_kv_cache_layout(std::span<const int32_t> layer_windows, bool hybrid = true);

// The most blocks one sequence can hold at any step over the groups of `windows` ([num_groups],
// 0 = full), if its positions reach num_positions and a step computes at most
// max_tokens_per_step new tokens: a full group ceil(num_positions / bs); a sliding group of
// window W keeps at most ceil((W - 1 + max_tokens_per_step) / bs) + 1 (the window behind the
// step's first token, plus the step's tokens, plus one block of misalignment), never more than
// the full count. The rule that admission (a request that could never fit alone is refused) and
// the scheduler share.
int64_t max_kv_blocks_held(std::span<const int32_t> windows, int32_t block_size, int64_t num_positions,
                           int64_t max_tokens_per_step);

}  // namespace tessera::kv

#include "kv/kv_cache_layout.h"

#include <algorithm>
#include <map>

namespace tessera::kv {

KvCacheLayout plan_kv_cache_layout(std::span<const int32_t> layer_windows, bool hybrid) {
  KvCacheLayout layout;
  const auto num_layers = static_cast<int32_t>(layer_windows.size());
  if (num_layers == 0) return layout;
  layout.layer_group.assign(layer_windows.size(), 0);
  layout.layer_slot.resize(layer_windows.size());
  // Layers of each window value, in layer order; 0 (full) sorts first.
  std::map<int32_t, std::vector<int32_t>> layers_of_window;
  for (int32_t l = 0; l < num_layers; ++l) layers_of_window[std::max(0, layer_windows[static_cast<size_t>(l)])].push_back(l);

  if (layers_of_window.size() == 1 || !hybrid) {
    layout.group_windows = {layers_of_window.size() == 1 ? layers_of_window.begin()->first : 0};
    for (int32_t l = 0; l < num_layers; ++l) layout.layer_slot[static_cast<size_t>(l)] = l;
    layout.num_slots = num_layers;
    return layout;
  }
  size_t group_size = layer_windows.size();
  for (const auto& [window, layers] : layers_of_window) group_size = std::min(group_size, layers.size());
  layout.num_slots = static_cast<int32_t>(group_size);
  for (const auto& [window, layers] : layers_of_window) {
    for (size_t first = 0; first < layers.size(); first += group_size) {
      const auto group = static_cast<int32_t>(layout.group_windows.size());
      layout.group_windows.push_back(window);
      for (size_t i = first; i < std::min(layers.size(), first + group_size); ++i) {
        const auto l = static_cast<size_t>(layers[i]);
        layout.layer_group[l] = group;
        layout.layer_slot[l] = static_cast<int32_t>(i - first);
      }
    }
  }
  return layout;
}

int64_t max_kv_blocks_held(std::span<const int32_t> windows, int32_t block_size, int64_t num_positions,
                           int64_t max_tokens_per_step) {
  const int64_t entries = (num_positions + block_size - 1) / block_size;
  int64_t held = 0;
  for (int32_t w : windows) {
    if (w <= 0) {
      held += entries;
    } else {
      held += std::min(entries, (w - 1 + max_tokens_per_step + block_size - 1) / block_size + 1);
    }
  }
  return held;
}

}  // namespace tessera::kv

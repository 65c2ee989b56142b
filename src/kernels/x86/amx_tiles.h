// Internal: the tile configuration of the AMX kernels (x86/matmul_packed_amx.cpp for the 32-block
// types, x86/matmul_packed_kquant_amx.cpp for Q4_K/Q5_K). A thread's tiles hold one configuration
// at a time and a call's tail tiles are set to its row count (m % 16), so both kernels load
// theirs through load_tile_config, which skips
// the ldtilecfg (about as costly as a few weight records, and it zeroes every tile) when this
// thread already holds the same bytes.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tessera::kernels::amx {

// The 64-byte operand of ldtilecfg, palette 1: per tile, its rows and its bytes per row.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of each tile
  uint8_t rows[16] = {};

  // Tile t: `rows` rows of `colsb` bytes.
  void set(int t, int num_rows, int bytes_per_row) {
    rows[t] = static_cast<uint8_t>(num_rows);
    colsb[t] = static_cast<uint16_t>(bytes_per_row);
  }
};
static_assert(sizeof(TileConfig) == 64);

// Loads `cfg` into this thread's tile configuration unless it already holds exactly that one.
inline void load_tile_config(const TileConfig& cfg) {
  thread_local TileConfig current{};
  thread_local bool loaded = false;
  if (loaded && std::memcmp(&current, &cfg, sizeof cfg) == 0) return;
  _tile_loadconfig(&cfg);
  current = cfg;
  loaded = true;
}

}  // namespace tessera::kernels::amx

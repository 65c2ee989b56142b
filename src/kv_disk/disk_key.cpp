#include "kv_disk/disk_key.h"

#include <xxhash.h>

#include <cstring>

namespace tessera::kv_disk {

namespace {
DiskKey from_xxh(XXH128_hash_t h) { return {h.high64, h.low64}; }
}  // namespace

DiskKey chain_disk_key(const DiskKey& parent, std::span<const int32_t> tokens, uint64_t extra_key) {
  // One buffer: parent (16 bytes), extra key (8), tokens (4 each); a block is a few dozen tokens.
  uint8_t head[24];
  std::memcpy(head, &parent.hi, 8);
  std::memcpy(head + 8, &parent.lo, 8);
  std::memcpy(head + 16, &extra_key, 8);
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, head, sizeof(head));
  XXH3_128bits_update(state, tokens.data(), tokens.size_bytes());
  const DiskKey out = from_xxh(XXH3_128bits_digest(state));
  XXH3_freeState(state);
  return out;
}

std::string to_hex(const DiskKey& key) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[static_cast<size_t>(15 - i)] = kDigits[(key.hi >> (4 * i)) & 0xf];
    out[static_cast<size_t>(31 - i)] = kDigits[(key.lo >> (4 * i)) & 0xf];
  }
  return out;
}

bool parse_disk_key(std::string_view hex, DiskKey* out) {
  if (hex.size() != 32) return false;
  uint64_t parts[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    const char c = hex[i];
    uint64_t d = 0;
    if (c >= '0' && c <= '9') {
      d = static_cast<uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<uint64_t>(c - 'a' + 10);
    } else {
      return false;
    }
    parts[i / 16] = (parts[i / 16] << 4) | d;
  }
  *out = {parts[0], parts[1]};
  return true;
}

DiskKey hash_bytes(std::span<const uint8_t> bytes) { return from_xxh(XXH3_128bits(bytes.data(), bytes.size())); }

NamespaceBuilder& NamespaceBuilder::add(uint64_t value) {
  bytes_.append(reinterpret_cast<const char*>(&value), sizeof(value));
  return *this;
}

NamespaceBuilder& NamespaceBuilder::add(std::string_view text) {
  add(static_cast<uint64_t>(text.size()));
  bytes_.append(text);
  return *this;
}

DiskKey NamespaceBuilder::build() const {
  return hash_bytes({reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size()});
}

}  // namespace tessera::kv_disk

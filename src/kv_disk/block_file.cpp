#include "kv_disk/block_file.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <cstring>

#include <fmt/format.h>

namespace tessera::kv_disk {

namespace {

constexpr char kMagic[8] = {'T', 'S', 'K', 'V', 'B', 'L', 'K', '1'};
constexpr size_t kChecksumOffset = 96;

template <typename T>
void put(std::vector<uint8_t>& buf, size_t offset, T value) {
  std::memcpy(buf.data() + offset, &value, sizeof(T));
}

template <typename T>
T get(std::span<const uint8_t> buf, size_t offset) {
  T value;
  std::memcpy(&value, buf.data() + offset, sizeof(T));
  return value;
}

DiskKey get_key(std::span<const uint8_t> buf, size_t offset) {
  return {get<uint64_t>(buf, offset), get<uint64_t>(buf, offset + 8)};
}

// Everything but the checksum field itself, over a file in two parts: head (header + token ids)
// and the rest. A stack state: no allocation per block.
uint64_t checksum_of(std::span<const uint8_t> head, std::span<const uint8_t> rest) {
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, head.data(), kChecksumOffset);
  XXH3_64bits_update(&state, head.data() + kBlockFileHeaderBytes, head.size() - kBlockFileHeaderBytes);
  XXH3_64bits_update(&state, rest.data(), rest.size());
  return XXH3_64bits_digest(&state);
}

}  // namespace

std::vector<uint8_t> encode_block_file(const BlockMeta& meta, std::span<const uint8_t> payload) {
  const size_t token_bytes = meta.tokens.size() * sizeof(int32_t);
  std::vector<uint8_t> buf(kBlockFileHeaderBytes + token_bytes + payload.size(), 0);
  std::memcpy(buf.data(), kMagic, sizeof(kMagic));
  put<uint32_t>(buf, 8, kBlockFileVersion);
  put<int32_t>(buf, 12, meta.group);
  put(buf, 16, meta.ns.hi), put(buf, 24, meta.ns.lo);
  put(buf, 32, meta.key.hi), put(buf, 40, meta.key.lo);
  put(buf, 48, meta.parent.hi), put(buf, 56, meta.parent.lo);
  put<uint64_t>(buf, 64, meta.pool_hash);
  put<uint64_t>(buf, 72, meta.pool_parent_hash);
  put<uint32_t>(buf, 80, static_cast<uint32_t>(meta.tokens.size()));
  put<uint32_t>(buf, 84, meta.has_pool_parent ? 1u : 0u);
  put<uint64_t>(buf, 88, payload.size());
  std::memcpy(buf.data() + kBlockFileHeaderBytes, meta.tokens.data(), token_bytes);
  if (!payload.empty()) std::memcpy(buf.data() + kBlockFileHeaderBytes + token_bytes, payload.data(), payload.size());
  const size_t head = kBlockFileHeaderBytes + token_bytes;
  put<uint64_t>(buf, kChecksumOffset, checksum_of({buf.data(), head}, {buf.data() + head, buf.size() - head}));
  return buf;
}

std::string verify_block_file(std::span<const uint8_t> file, const BlockMeta& expected, size_t payload_bytes,
                              std::span<const uint8_t>* payload) {
  const size_t head = block_file_head_bytes(expected.tokens.size());
  const size_t want = head + payload_bytes;
  if (file.size() != want) return fmt::format("size {} bytes, expected {}", file.size(), want);
  std::string why = verify_block_parts(file.first(head), file.subspan(head), expected, payload_bytes);
  if (why.empty()) *payload = file.subspan(head, payload_bytes);
  return why;
}

std::string verify_block_parts(std::span<const uint8_t> head, std::span<const uint8_t> payload, const BlockMeta& expected,
                               size_t payload_bytes) {
  const size_t token_bytes = expected.tokens.size() * sizeof(int32_t);
  if (head.size() != kBlockFileHeaderBytes + token_bytes || payload.size() != payload_bytes) {
    return fmt::format("size {} bytes, expected {}", head.size() + payload.size(), kBlockFileHeaderBytes + token_bytes + payload_bytes);
  }
  if (std::memcmp(head.data(), kMagic, sizeof(kMagic)) != 0) return "bad magic";
  if (get<uint32_t>(head, 8) != kBlockFileVersion) return fmt::format("version {}", get<uint32_t>(head, 8));
  if (get<uint64_t>(head, kChecksumOffset) != checksum_of(head, payload)) return "checksum mismatch";
  if (!(get_key(head, 16) == expected.ns)) return "another namespace";
  if (!(get_key(head, 32) == expected.key)) return "another key";
  if (!(get_key(head, 48) == expected.parent)) return "another parent key";
  if (get<int32_t>(head, 12) != expected.group) return fmt::format("group {}", get<int32_t>(head, 12));
  if (get<uint32_t>(head, 80) != expected.tokens.size()) return "another block size";
  if (get<uint64_t>(head, 88) != payload_bytes) return "another payload size";
  if (std::memcmp(head.data() + kBlockFileHeaderBytes, expected.tokens.data(), token_bytes) != 0) return "other token ids";
  return {};
}

bool read_pool_hash(std::span<const uint8_t> file, uint64_t* pool_hash) {
  if (file.size() < kBlockFileHeaderBytes || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0) return false;
  *pool_hash = get<uint64_t>(file, 64);
  return true;
}

}  // namespace tessera::kv_disk

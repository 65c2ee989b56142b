// DiskStore (budget, LRU order by last use, two stores on one directory, atomic files) and
// DiskTier (the I/O thread: reads verified, corrupt files deleted, the write queue's bound).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "kv_disk/disk_tier.h"

namespace tessera::kv_disk {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("tessera_kv_disk_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

DiskKey key_of(int i) { return {static_cast<uint64_t>(i), 0x1234}; }
std::vector<uint8_t> bytes_of(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

std::unique_ptr<DiskStore> open_store(const fs::path& dir, int64_t budget) {
  auto store = DiskStore::open({dir.string(), {7, 7}, budget});
  EXPECT_TRUE(store.ok());
  return std::move(*store);
}

TEST(DiskStore, WritesReadsAndNamesFiles) {
  TempDir t;
  auto store = open_store(t.path, 1000);
  EXPECT_EQ(store->path(), (t.path / "00000000000000070000000000000007").string());
  EXPECT_FALSE(store->contains(key_of(1)));
  EXPECT_EQ(store->write(key_of(1), bytes_of(100, 1)).status, WriteStatus::kWritten);
  EXPECT_TRUE(fs::exists(store->path() + "/00000000000000010000000000001234.kvb"));
  EXPECT_TRUE(store->contains(key_of(1)));
  EXPECT_EQ(store->read(key_of(1)), bytes_of(100, 1));
  EXPECT_EQ(store->bytes(), 100);
  EXPECT_EQ(store->read(key_of(2)), std::nullopt);
  // No temp file is left behind.
  int64_t n = 0;
  for (const auto& e : fs::directory_iterator(store->path())) n += e.path().extension() == ".kvb" ? 1 : 100;
  EXPECT_EQ(n, 1);
}

// read_into: the file in two parts straight into the caller's buffers, only when its size is
// exactly theirs (else the size, nothing read); a missing file is nullopt.
TEST(DiskStore, ReadIntoFillsBothPartsOnlyForTheExactSize) {
  TempDir t;
  auto store = open_store(t.path, 1000);
  std::vector<uint8_t> bytes(100);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  ASSERT_EQ(store->write(key_of(1), bytes).status, WriteStatus::kWritten);
  std::vector<uint8_t> head(30, 0xee), payload(70, 0xee);
  EXPECT_EQ(store->read_into(key_of(1), head, payload), std::optional<int64_t>(100));
  EXPECT_TRUE(std::equal(head.begin(), head.end(), bytes.begin()));
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), bytes.begin() + 30));
  std::vector<uint8_t> longer(71, 0xee);
  EXPECT_EQ(store->read_into(key_of(1), head, longer), std::optional<int64_t>(100));
  EXPECT_EQ(longer, std::vector<uint8_t>(71, 0xee));  // not read
  EXPECT_EQ(store->read_into(key_of(2), head, payload), std::nullopt);
}

TEST(DiskStore, EvictsLeastRecentlyUsedFirst) {
  TempDir t;
  auto store = open_store(t.path, 300);
  for (int i = 1; i <= 3; ++i) {
    ASSERT_EQ(store->write(key_of(i), bytes_of(100, static_cast<uint8_t>(i))).status, WriteStatus::kWritten);
  }
  EXPECT_EQ(store->lru_order(), (std::vector<DiskKey>{key_of(1), key_of(2), key_of(3)}));
  ASSERT_TRUE(store->read(key_of(1)));  // 1 used last: 2 is now the oldest
  EXPECT_EQ(store->lru_order(), (std::vector<DiskKey>{key_of(2), key_of(3), key_of(1)}));
  const WriteResult r = store->write(key_of(4), bytes_of(150, 4));  // needs two files' room
  EXPECT_EQ(r.status, WriteStatus::kWritten);
  EXPECT_EQ(r.num_evicted, 2);
  EXPECT_EQ(store->lru_order(), (std::vector<DiskKey>{key_of(1), key_of(4)}));
  EXPECT_FALSE(store->contains(key_of(2)));
  EXPECT_FALSE(store->contains(key_of(3)));
  EXPECT_EQ(store->bytes(), 250);
  EXPECT_EQ(store->write(key_of(5), bytes_of(301, 5)).status, WriteStatus::kTooLarge);
}

TEST(DiskStore, TwoStoresOnOneDirectoryKeepTheBudget) {
  TempDir t;
  auto a = open_store(t.path, 400);
  auto b = open_store(t.path, 400);  // a second replica on the same directory
  for (int i = 0; i < 20; ++i) {
    DiskStore& s = i % 2 == 0 ? *a : *b;
    ASSERT_EQ(s.write(key_of(i), bytes_of(100, static_cast<uint8_t>(i))).status, WriteStatus::kWritten);
    int64_t on_disk = 0;
    for (const auto& e : fs::directory_iterator(a->path())) on_disk += static_cast<int64_t>(fs::file_size(e.path()));
    // Each store rescans before it evicts: never more than the budget plus one block.
    EXPECT_LE(on_disk, 400 + 100) << "after write " << i;
  }
  EXPECT_TRUE(b->contains(key_of(18)));  // b sees a's file (a stat)
  EXPECT_EQ(b->read(key_of(18)), bytes_of(100, 18));
}

TEST(DiskStore, ReopenFindsFilesInLastUseOrder) {
  TempDir t;
  {
    auto store = open_store(t.path, 1000);
    store->write(key_of(1), bytes_of(10, 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    store->write(key_of(2), bytes_of(10, 2));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    store->read(key_of(1));  // touched: newer than 2
  }
  auto store = open_store(t.path, 1000);
  EXPECT_EQ(store->num_files(), 2);
  EXPECT_EQ(store->lru_order(), (std::vector<DiskKey>{key_of(2), key_of(1)}));
}

TEST(DiskStore, UnusableDirectoryIsAnError) {
  TempDir t;
  fs::create_directories(t.path);
  std::ofstream(t.path / "file") << "x";
  auto store = DiskStore::open({(t.path / "file" / "sub").string(), {1, 1}, 100});
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find("file/sub"), std::string::npos) << store.error().message;
}

BlockMeta meta_of(int i, DiskKey ns) {
  BlockMeta m;
  m.ns = ns;
  m.tokens = {i, i + 1};
  m.parent = kRootDiskKey;
  m.key = chain_disk_key(m.parent, m.tokens, 0);
  m.pool_hash = static_cast<uint64_t>(i);
  return m;
}

// A tier on `t` (64-byte payloads) with blocks 1 and 2 written and flushed.
std::unique_ptr<DiskTier> tier_with_two_blocks(const TempDir& t, DiskTierConfig& c, bool record_events) {
  c.store = {t.path.string(), {3, 4}, 1 << 20};
  c.payload_bytes = 64;
  c.record_events = record_events;
  auto tier = DiskTier::open(c);
  EXPECT_TRUE(tier.ok());
  if (!tier.ok()) return nullptr;
  EXPECT_TRUE((*tier)->submit_write(meta_of(1, c.store.ns), bytes_of(64, 1)));
  EXPECT_TRUE((*tier)->submit_write(meta_of(2, c.store.ns), bytes_of(64, 2)));
  (*tier)->flush();
  return std::move(*tier);
}

TEST(DiskTier, WritesThenReadsVerifiedAndDeletesCorruptFiles) {
  TempDir t;
  DiskTierConfig c;
  std::unique_ptr<DiskTier> tier = tier_with_two_blocks(t, c, /*record_events=*/true);
  ASSERT_NE(tier, nullptr);
  DiskTier& d = *tier;
  EXPECT_EQ(d.stats().writes, 2);
  const std::vector<DiskEvent> events = d.drain_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].stored);
  EXPECT_EQ(events[0].pool_hash, 1u);
  EXPECT_EQ(events[0].tokens, (std::vector<int32_t>{1, 2}));

  // Damage block 2's file: one flipped payload byte.
  const std::string path2 = d.store().file_of(meta_of(2, c.store.ns).key);
  {
    std::fstream f(path2, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  d.submit_reads({{.ticket = 9, .index = 0, .expected = meta_of(1, c.store.ns)},
                  {.ticket = 9, .index = 1, .expected = meta_of(2, c.store.ns)},
                  {.ticket = 9, .index = 2, .expected = meta_of(3, c.store.ns)}});
  d.flush();
  std::vector<ReadResult> got = d.take_reads();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].status, ReadStatus::kOk);
  EXPECT_EQ(got[0].payload, bytes_of(64, 1));
  EXPECT_EQ(got[1].status, ReadStatus::kCorrupt);
  EXPECT_EQ(got[2].status, ReadStatus::kMissing);
  EXPECT_FALSE(fs::exists(path2));  // deleted: recomputed and written again whole
  const DiskTierStats s = d.stats();
  EXPECT_EQ(s.reads, 1);
  EXPECT_EQ(s.corrupt_blocks, 1);
  EXPECT_EQ(s.read_misses, 1);
  EXPECT_EQ(s.num_files, 1);
}

// A recycled payload buffer is what the next read lands in (no allocation per block), and a read
// of a truncated file is corrupt (deleted), its buffer kept for the next read.
TEST(DiskTier, ReadsLandInRecycledBuffers) {
  TempDir t;
  DiskTierConfig c;
  std::unique_ptr<DiskTier> tier = tier_with_two_blocks(t, c, /*record_events=*/false);
  ASSERT_NE(tier, nullptr);
  DiskTier& d = *tier;
  d.submit_reads({{.ticket = 1, .index = 0, .expected = meta_of(1, c.store.ns)}});
  d.flush();
  std::vector<ReadResult> got = d.take_reads();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].payload, bytes_of(64, 1));
  const uint8_t* buffer = got[0].payload.data();
  d.recycle(std::move(got[0].payload));
  d.submit_reads({{.ticket = 1, .index = 1, .expected = meta_of(2, c.store.ns)}});
  d.flush();
  got = d.take_reads();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, ReadStatus::kOk);
  EXPECT_EQ(got[0].payload, bytes_of(64, 2));
  EXPECT_EQ(got[0].payload.data(), buffer);
  // Truncated by one byte: corrupt, deleted, and no payload handed out.
  const std::string path1 = d.store().file_of(meta_of(1, c.store.ns).key);
  fs::resize_file(path1, fs::file_size(path1) - 1);
  d.submit_reads({{.ticket = 2, .index = 0, .expected = meta_of(1, c.store.ns)}});
  d.flush();
  got = d.take_reads();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, ReadStatus::kCorrupt);
  EXPECT_TRUE(got[0].payload.empty());
  EXPECT_FALSE(fs::exists(path1));
  EXPECT_EQ(d.stats().corrupt_blocks, 1);
}

// An aborted request's reads: those not started are dropped, those done are discarded; every
// read is accounted for exactly once (run and handed out before the cancel, or dropped), and the
// other ticket's reads are untouched.
TEST(DiskTier, CancelledReadsDoNotRunOrComeBack) {
  TempDir t;
  DiskTierConfig c;
  std::unique_ptr<DiskTier> tier = tier_with_two_blocks(t, c, /*record_events=*/false);
  ASSERT_NE(tier, nullptr);
  DiskTier& d = *tier;
  std::vector<ReadRequest> reads;
  for (int i = 0; i < 200; ++i) reads.push_back({.ticket = 5, .index = i, .expected = meta_of(1 + i % 2, c.store.ns)});
  reads.push_back({.ticket = 6, .index = 0, .expected = meta_of(2, c.store.ns)});
  d.submit_reads(std::move(reads));
  const int64_t dropped = d.cancel_reads(5);
  d.flush();
  const std::vector<ReadResult> got = d.take_reads();
  int64_t run = 0;
  for (const ReadResult& r : got) run += r.ticket == 5 ? 1 : 0;
  EXPECT_LE(run, 1);  // at most the read the I/O thread had started when the cancel came
  EXPECT_EQ(d.stats().reads, 200 - dropped + 1);  // what ran: ticket 5's survivors and ticket 6
  ASSERT_EQ(got.size(), static_cast<size_t>(run + 1));
  EXPECT_EQ(got.back().ticket, 6);
  EXPECT_EQ(got.back().payload, bytes_of(64, 2));
  EXPECT_EQ(d.cancel_reads(5), 0);  // nothing left
}

TEST(DiskTier, FullWriteQueueDropsInsteadOfBlocking) {
  TempDir t;
  DiskTierConfig c;
  c.store = {t.path.string(), {3, 4}, 1 << 20};
  c.payload_bytes = 64;
  c.max_queued_write_bytes = 0;  // nothing fits: every write is a drop
  auto tier = DiskTier::open(c);
  ASSERT_TRUE(tier.ok());
  EXPECT_FALSE((*tier)->submit_write(meta_of(1, c.store.ns), bytes_of(64, 1)));
  (*tier)->flush();
  EXPECT_EQ((*tier)->stats().write_drops, 1);
  EXPECT_EQ((*tier)->stats().writes, 0);
}

}  // namespace
}  // namespace tessera::kv_disk

// probe_batched_attention: the attention of one batched decode step of SmolLM2's shape in
// isolation (30 layers, 9 query / 3 KV heads of 64, blocks of 16; --shape qwen2.5-0.5b: 24 layers, 14 / 2), to tell memory from compute:
// S sequences at ctx keys each, blocks handed out as the engine does (each sequence's prompt
// blocks in a row, decode blocks interleaved). Prints the best ms per step over the repetitions
// and the K/V bytes it read per second. --same points every sequence and layer at one layer's
// blocks (the K/V then stays in L2: the compute-only time). --gap-us N spins N us (touching no
// memory) before each layer, as a decode step's matmuls would, and leaves the gaps out of the time:
// it shows how long the K/V survives in the shared L3 between two reads (bench/LOG.md, B4).
// --stream-mb N reads N MB of other memory before each layer, also left out of the time: with
// N x layers past the L3's size, every layer's K/V comes from DRAM, as in an engine step.
// Usage: probe_batched_attention [--seqs 16] [--ctx 192] [--threads 2] [--kv-dtype f16|q8] [--same]
//                                [--gap-us 0] [--stream-mb 0] [--shape smollm2|qwen2.5-0.5b]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "util/huge_buffer.h"
#include "util/thread_pool.h"

using namespace tessera;
using namespace tessera::kernels;

int main(int argc, char** argv) {
  int32_t seqs = 16, ctx = 192, threads = 2, gap_us = 0, stream_mb = 0;
  int32_t kLayers = 30, kHeads = 9, kKvHeads = 3;
  bool q8 = false, same = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--seqs") seqs = std::atoi(next().c_str());
    else if (a == "--ctx") ctx = std::atoi(next().c_str());
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--kv-dtype") q8 = next() == "q8";
    else if (a == "--same") same = true;
    else if (a == "--gap-us") gap_us = std::atoi(next().c_str());
    else if (a == "--stream-mb") stream_mb = std::atoi(next().c_str());
    else if (a == "--shape") {  // layers x query heads / KV heads of head_dim 64
      const std::string shape = next();
      if (shape == "qwen2.5-0.5b") kLayers = 24, kHeads = 14, kKvHeads = 2;
      else if (shape != "smollm2") {
        std::fprintf(stderr, "error: --shape is smollm2 or qwen2.5-0.5b\n");
        return 2;
      }
    }
    else {
      std::fprintf(stderr, "usage: probe_batched_attention [--seqs 16] [--ctx 192] [--threads 2] [--kv-dtype f16|q8] [--same] [--gap-us 0] [--stream-mb 0] [--shape smollm2|qwen2.5-0.5b]\n");
      return 2;
    }
  }
  if (seqs < 1 || seqs > 4096 || ctx < 1 || ctx > 32768 || threads < 1 || threads > 256 || gap_us < 0 ||
      gap_us > 1000000 || stream_mb < 0 || stream_mb > 1024) {
    std::fprintf(stderr,
                 "error: need 1 <= --seqs <= 4096, 1 <= --ctx <= 32768, 1 <= --threads <= 256, 0 <= --gap-us <= 1000000\n");
    return 2;
  }
  constexpr int32_t kHeadDim = 64, kBlock = 16;
  const int32_t blocks_per_seq = (ctx + kBlock - 1) / kBlock;
  const int32_t num_blocks = seqs * std::max(blocks_per_seq, 8) + 8;
  const size_t elem = q8 ? 1 : 2;
  const size_t tensor = size_t(num_blocks) * kBlock * kKvHeads * kHeadDim * elem;
  const size_t scales = size_t(num_blocks) * kBlock * kKvHeads * sizeof(float);
  HugeBuffer buf(size_t(kLayers) * 2 * (tensor + scales));
  std::mt19937 rng(1);
  for (size_t i = 0; i + 1 < buf.size(); i += 2) {  // f16 values in [0.125, 0.25); q8 bytes anything
    const uint16_t v = static_cast<uint16_t>(0x3000 + (rng() & 0x3ff));
    std::copy_n(reinterpret_cast<const uint8_t*>(&v), 2, buf.data() + i);
  }
  std::vector<KvLayer> layers(kLayers);
  for (int32_t l = 0; l < kLayers; ++l) {
    uint8_t* base = buf.data() + size_t(l) * 2 * tensor;
    layers[l] = KvLayer{base, base + tensor, q8 ? KvDType::kQ8 : KvDType::kF16, num_blocks, kBlock, kKvHeads, kHeadDim};
    if (q8) {
      auto* sc = reinterpret_cast<float*>(buf.data() + size_t(kLayers) * 2 * tensor + size_t(l) * 2 * scales);
      std::fill(sc, sc + 2 * scales / sizeof(float), 0.01f);
      layers[l].k_scale = sc;
      layers[l].v_scale = sc + scales / sizeof(float);
    }
  }
  std::vector<int32_t> indptr{0}, indices, qsl{0}, lens;
  for (int32_t s = 0; s < seqs; ++s) {
    for (int32_t b = 0; b < blocks_per_seq; ++b) indices.push_back(same ? b : b < 8 ? s * 8 + b : seqs * 8 + (b - 8) * seqs + s);
    indptr.push_back(static_cast<int32_t>(indices.size()));
    qsl.push_back(s + 1);
    lens.push_back(ctx);
  }
  std::vector<int64_t> slots(seqs, -1);
  const AttnMetadata md{seqs, seqs, qsl.data(), lens.data(), indptr.data(), indices.data(), slots.data()};
  std::vector<float> q(size_t(seqs) * kHeads * kHeadDim, 0.1f), out(q.size());
  // --stream-mb: a distinct stretch of this buffer is read before each layer (untimed), as a decode
  // step's weights stream through the L3 between two reads of one layer's K/V.
  std::vector<uint64_t> weights(size_t(stream_mb) * (1 << 20) * kLayers / sizeof(uint64_t) + 1, 1);
  volatile uint64_t sink = 0;
  ThreadPool pool(threads);
  AttnWorkspace ws;
  double best = 1e30;
  for (int rep = 0; rep < 40; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    double gaps_ms = 0;
    for (int32_t l = 0; l < kLayers; ++l) {
      if (stream_mb > 0) {
        const auto g0 = std::chrono::steady_clock::now();
        const size_t words = size_t(stream_mb) * (1 << 20) / sizeof(uint64_t);
        uint64_t sum = 0;
        for (size_t w = size_t(l) * words; w < size_t(l + 1) * words; w += 8) sum += weights[w];
        sink = sink + sum;
        gaps_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - g0).count();
      }
      if (gap_us > 0) {  // idle, as the engine is for the K/V while the matmuls run
        const auto g0 = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - g0 < std::chrono::microseconds(gap_us)) {
        }
        gaps_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - g0).count();
      }
      paged_attention(layers[same ? 0 : l], md, q.data(), kHeads, 0.125f, out.data(), pool, ws);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() - gaps_ms;
    if (rep >= 5) best = std::min(best, ms);
  }
  const double mb = double(seqs) * ctx * kLayers * kKvHeads * kHeadDim * 2 * elem / 1e6;
  std::string gap = gap_us > 0 ? " (+" + std::to_string(gap_us) + " us idle before each layer)" : "";
  if (stream_mb > 0) gap += " (" + std::to_string(stream_mb) + " MB streamed before each layer)";
  std::printf("probe_batched_attention: %d seqs x %d keys, %d threads, %s%s%s: %.3f ms per step (%d layers, %d/%d heads), %.1f MB of K/V, %.1f GB/s\n",
              seqs, ctx, threads, q8 ? "q8" : "f16", same ? " (--same: one layer's blocks, cache-hot)" : "", gap.c_str(), best, kLayers, kHeads, kKvHeads, mb,
              mb / best);
  return 0;
}

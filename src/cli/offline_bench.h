// Offline engine benchmarks (no HTTP): a seeded synthetic workload submitted at once.
//   throughput: tokens/s, TTFT, TPOT, batch occupancy; --policy continuous|static|both (both =
//               interleaved rounds of each, one table with the ratio)
//   sweep:      the throughput-versus-latency curve across --max-num-seqs values (+ PNG plot)
#pragma once
#include <string>

namespace tessera::cli {

int offline_bench_main(const std::string& mode, int argc, char** argv);

}  // namespace tessera::cli

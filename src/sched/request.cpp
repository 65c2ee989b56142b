#include "sched/request.h"

#include "kv/kv_cache_layout.h"

namespace tessera::sched {

FinishReason finish_reason_of(RequestStatus s) {
  switch (s) {
    case RequestStatus::kFinishedStopped: return FinishReason::kStop;
    case RequestStatus::kFinishedLength: return FinishReason::kLength;
    case RequestStatus::kFinishedAborted: return FinishReason::kAbort;
    case RequestStatus::kFinishedError: return FinishReason::kError;
    default: return FinishReason::kNone;
  }
}

const char* finish_reason(RequestStatus s) { return finish_reason_name(finish_reason_of(s)); }

const char* request_status_name(RequestStatus s) {
  switch (s) {
    case RequestStatus::kWaiting: return "waiting";
    case RequestStatus::kRunning: return "running";
    case RequestStatus::kPreempted: return "preempted";
    case RequestStatus::kFinishedStopped: return "finished_stopped";
    case RequestStatus::kFinishedLength: return "finished_length";
    case RequestStatus::kFinishedAborted: return "finished_aborted";
    case RequestStatus::kFinishedError: return "finished_error";
  }
  return "?";
}

StopParams stop_params_from(const SamplingParams& params, std::vector<int32_t> eos_token_ids) {
  StopParams stop;
  stop.max_tokens = params.max_tokens;
  stop.min_tokens = params.min_tokens;
  stop.eos_token_ids = std::move(eos_token_ids);
  stop.stop_token_ids = params.stop_token_ids;
  stop.ignore_eos = params.ignore_eos;
  return stop;
}

int64_t max_kv_blocks_of_request(int64_t num_prompt, int64_t max_tokens, const KvBlockRule& rule) {
  static constexpr int32_t kOneFullGroup[] = {0};
  const std::span<const int32_t> windows = rule.group_windows.empty() ? std::span<const int32_t>(kOneFullGroup)
                                                                      : rule.group_windows;
  return kv::max_kv_blocks_held(windows, rule.block_size, num_prompt + max_tokens - 1, rule.max_tokens_per_step);
}

void Request::append_token(int32_t token, int32_t block_size) {
  output_ids.push_back(token);
  kv::extend_block_hashes(block_hashes, tokens(), block_size, cache_extra_key);
}

}  // namespace tessera::sched

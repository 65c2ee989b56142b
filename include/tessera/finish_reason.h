// FinishReason: why a sample ended, and its one name table ("stop", "length", "abort", "error"; the
// OpenAI finish_reason for the first two). The scheduler maps its statuses onto it
// (sched::finish_reason_of), the server and the CLI print finish_reason_name.
#pragma once

namespace tessera {

enum class FinishReason { kNone = 0, kStop, kLength, kAbort, kError };

constexpr const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "";
}

}  // namespace tessera

#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>

namespace tessera::cli {

ProgressReporter::ProgressReporter(std::string label, bool terminal)
    : label_(std::move(label)), terminal_(terminal) {}

void ProgressReporter::update(double fraction) {
  if (finished_) return;
  fraction = std::clamp(fraction, 0.0, 1.0);
  if (terminal_) {
    const int percent = static_cast<int>(fraction * 100.0);
    if (percent == last_shown_) return;
    last_shown_ = percent;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth + 0.5);
    std::fprintf(stderr, "\r%s [%.*s%.*s] %3d%%", label_.c_str(), filled, "==============================",
                 kWidth - filled, "                              ", percent);
  } else {
    const int quarter = static_cast<int>(fraction * 4.0);
    if (quarter == last_shown_ || quarter == 0) return;
    last_shown_ = quarter;
    std::fprintf(stderr, "%s: %d%%\n", label_.c_str(), quarter * 25);
  }
  std::fflush(stderr);
}

void ProgressReporter::done() {
  if (finished_) return;
  finished_ = true;
  if (terminal_) {
    std::fprintf(stderr, "\r%*s\r", static_cast<int>(label_.size()) + 40, "");
  } else if (last_shown_ < 4) {
    std::fprintf(stderr, "%s: done\n", label_.c_str());
  }
  std::fflush(stderr);
}

std::function<void(double)> load_progress_reporter(const std::string& model_path) {
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(model_path, ec);
  if (!terminal && (ec || static_cast<long long>(bytes) < kPlainProgressBytes)) return nullptr;
  auto reporter = std::make_shared<ProgressReporter>(
      "loading " + std::filesystem::path(model_path).filename().string(), terminal);
  return [reporter](double fraction) {
    reporter->update(fraction);
    if (fraction >= 1.0) reporter->done();
  };
}

}  // namespace tessera::cli

// Progress where people wait: a bar on a terminal, plain lines otherwise (a log, CI, a pipe).
//   ProgressReporter p("loading model", isatty(STDERR_FILENO));
//   p.update(0.42);  // "\rloading model [============                  ]  42%" on a terminal;
//                    // "loading model: 25%" lines at every quarter otherwise
//   p.done();        // erases the bar (terminal) or prints "loading model: done" (plain)
// Writes to stderr only, so stdout stays the command's output.
#pragma once
#include <functional>
#include <string>

namespace tessera::cli {

class ProgressReporter {
 public:
  ProgressReporter(std::string label, bool terminal);
  void update(double fraction);  // 0..1, monotone; repeated values print nothing new
  void done();

 private:
  std::string label_;
  bool terminal_;
  int last_shown_ = -1;  // percent (terminal) or quarter (plain) last printed
  bool finished_ = false;
};

// The weight-loading callback of run, chat and serve (EngineConfig::on_load_progress): a bar on a
// terminal (stderr) for any file; plain lines only for files of kPlainProgressBytes or more (a small
// model loads before anyone reads them); nullptr when neither applies.
inline constexpr long long kPlainProgressBytes = 500LL << 20;
std::function<void(double)> load_progress_reporter(const std::string& model_path);

}  // namespace tessera::cli

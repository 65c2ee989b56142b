// Streaming tool-call parser: the twin of parse_tool_calls (tool_calls.h) for text that arrives in
// pieces cut anywhere (inside a marker, a JSON string, an escape, a UTF-8 character). It sends
//   content    as it comes, except what may still be the start of a marker (a tail that is a
//              prefix of <tool_call> / [TOOL_CALLS]), blanks that would be trimmed next to a
//              block, and an output that opens with JSON (held until it is or is not calls);
//   call start (index, name) once a call's name string has closed, the name is a known function
//              and its arguments have begun (or the call ended without any);
//   arguments  the bytes of the arguments object as they are generated (only bytes of a valid
//              JSON prefix, whole UTF-8 characters; a string-valued "arguments" in one piece when
//              its string closes; "{}" when the call has none).
// For every output that parse_tool_calls reads, with or without calls, the concatenated content
// equals its content and the concatenated arguments its arguments, however the text is cut.
// Malformed output found before any call was announced ends as the whole text in content. A call
// that breaks after its start was sent (the output ends inside it, an unknown name or bad JSON
// later in the same output) cannot be taken back: the rest of the text is sent as content and
// made_calls() is false, so the finish reason stays the engine's (OpenAI and vLLM do the same
// when max_tokens cuts a call).
#pragma once
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_scan.h"
#include "server/tool_calls.h"

namespace tessera::server {

struct ToolCallEvent {
  enum class Kind { kContent, kCallStart, kArguments };
  Kind kind = Kind::kContent;
  size_t index = 0;  // kCallStart / kArguments: the call's index in the choice
  std::string text;  // content, the function name, or an arguments fragment
};

class ToolCallStream {
 public:
  // known_functions must outlive the stream. parallel: false sends only the first call.
  ToolCallStream(ToolCallFormat format, const std::set<std::string>* known_functions, bool parallel);
  void push(std::string_view text, std::vector<ToolCallEvent>* out);
  void finish(std::vector<ToolCallEvent>* out);
  // After finish(): calls were sent and each of them completed.
  bool made_calls() const { return num_announced_ > 0 && !broken_ && finished_; }

 private:
  enum class Mode {
    kStart,    // only blanks so far: is the output a JSON region?
    kRegion,   // scanning a JSON region from region_
    kText,     // content, looking for the family marker
    kBlock,    // inside <tool_call> from region_
    kValues,   // after [TOOL_CALLS] from region_
    kPlain,    // decided: the rest is content
  };
  void advance(bool at_end, std::vector<ToolCallEvent>* out);
  bool step(bool at_end, std::vector<ToolCallEvent>* out);  // false: wait for more text
  bool scan_region(ScanShape shape, bool at_end, std::vector<ToolCallEvent>* out);
  void text_step(bool at_end, std::vector<ToolCallEvent>* out);
  void send_calls(const std::vector<CallScan>& calls, std::vector<ToolCallEvent>* out);
  void fail();  // malformed: fall back, or break a started call
  void content(std::string_view text, std::vector<ToolCallEvent>* out);

  ToolCallFormat format_;
  std::string_view marker_;
  const std::set<std::string>* known_;
  bool parallel_;
  std::string buf_;             // the whole text so far
  Mode mode_ = Mode::kStart;
  size_t pos_ = 0;              // kText/kPlain: first byte not yet sent or dropped
  size_t region_ = 0;           // kRegion/kBlock/kValues: where the scanned region starts
  size_t sent_upto_ = 0;        // before any call: content sent is exactly buf_[0, sent_upto_)
  bool after_block_ = false;    // kText: at the start of a piece after a block (blanks dropped)
  bool content_sent_ = false;   // some non-empty content went out
  size_t call_base_ = 0;        // calls in the blocks before region_
  size_t num_announced_ = 0;    // calls whose start was sent (indices 0..num_announced_-1)
  std::vector<size_t> args_sent_;  // per announced call: argument bytes sent (kObject)
  std::vector<bool> args_done_;    // per announced call: every argument byte sent
  size_t consumed_ = 0;         // after a break: the text from here goes out as content
  bool broken_ = false;
  bool finished_ = false;
};

}  // namespace tessera::server

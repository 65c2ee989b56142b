// Incremental scan of tool-call JSON for the streaming parser (tool_call_stream.h): a validating
// recursive-descent JSON reader that accepts a prefix. Given the text of a region so far it says
// whether that text is a valid prefix (kMore), complete (kComplete) or can no longer become valid
// calls (kBad), and what it knows of each call: the name once its string has closed, and how many
// bytes of the arguments object are settled. The streaming side re-scans its region on every
// delta (regions are small), so this holds no state between calls.
//
// The accepted language is the one tool_calls.h describes (containers, first deciding key,
// repeated keys malformed, arguments an object or a string holding one), checked byte by byte:
// RFC 8259 strings (escapes, surrogate pairs, UTF-8, no control bytes), numbers and literals.
#pragma once
#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

struct CallScan {
  enum class Args { kNone, kObject, kString };
  bool has_name = false;
  std::string name;             // decoded, once has_name
  Args args = Args::kNone;
  size_t args_begin = 0;        // kObject: offset of '{' in the scanned text
  size_t args_end = 0;          // kObject: end of the settled bytes (whole UTF-8 characters)
  bool args_complete = false;
  std::string args_text;        // kString: the decoded, trimmed object text once complete
  bool complete = false;        // the call object has closed
};

enum class ScanStatus { kMore, kComplete, kBad };

enum class ScanShape {
  kRegion,  // an output that starts with JSON: [<|python_tag|>] [```info\n] containers [```]
  kBlock,   // after <tool_call>: one container, then </tool_call> (or the end of the output)
  kValues,  // after [TOOL_CALLS]: containers to the end
};

struct CallsScan {
  ScanStatus status = ScanStatus::kMore;
  std::vector<CallScan> calls;  // in order; the last may be partial (has_name false: not yet a call)
  size_t end = 0;               // kComplete kBlock: the offset just past </tool_call> (or the end)
};

// text: the region so far; at_end: the output has ended (kMore becomes kBad).
// python_tag: kRegion may start with <|python_tag|> (Llama 3).
CallsScan scan_tool_calls(std::string_view text, ScanShape shape, bool python_tag, bool at_end,
                          const std::set<std::string>& known_functions);

}  // namespace tessera::server

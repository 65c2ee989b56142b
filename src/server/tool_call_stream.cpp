// Streaming tool-call parser (see tool_call_stream.h). The text so far is kept whole; the mode says
// what its undecided part is, and JSON regions are re-scanned from their start on every delta
// (scan_tool_calls), the calls found compared with what was already sent.
//
//   buf_:  [content sent][held: blanks, marker prefix]            mode kText, pos_ at "held"
//          [content sent]<tool_call>[region_ ... scanned ...]     mode kBlock
//          [ {"name": "f", "arguments": {"a": 1, "b"  ]           mode kRegion: sent "{"a": 1, "b"
#include "server/tool_call_stream.h"

#include <algorithm>

namespace tessera::server {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view rtrim(std::string_view s) {
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// Bytes at the end of `s` that start a UTF-8 character not yet complete.
size_t incomplete_utf8_tail(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return len > back ? back : 0;
  }
  return 0;
}

// How much of the end of `s` to hold in kText: a proper prefix of `marker`, the blanks before it
// (trimmed if a block follows), or an unfinished UTF-8 character.
size_t held_tail(std::string_view s, std::string_view marker) {
  size_t keep = 0;
  for (size_t len = std::min(marker.size() - 1, s.size()); len > 0; --len) {
    if (s.ends_with(marker.substr(0, len))) {
      keep = len;
      break;
    }
  }
  while (keep < s.size() && is_blank(s[s.size() - keep - 1])) ++keep;
  return keep > 0 ? keep : incomplete_utf8_tail(s);
}

}  // namespace

ToolCallStream::ToolCallStream(ToolCallFormat format, const std::set<std::string>* known_functions, bool parallel)
    : format_(format), marker_(tool_call_marker(format)), known_(known_functions), parallel_(parallel) {}

void ToolCallStream::push(std::string_view text, std::vector<ToolCallEvent>* out) {
  buf_ += text;
  advance(/*at_end=*/false, out);
}

void ToolCallStream::finish(std::vector<ToolCallEvent>* out) {
  advance(/*at_end=*/true, out);
  finished_ = true;
}

void ToolCallStream::advance(bool at_end, std::vector<ToolCallEvent>* out) {
  while (step(at_end, out)) {
  }
}

bool ToolCallStream::step(bool at_end, std::vector<ToolCallEvent>* out) {
  switch (mode_) {
    case Mode::kStart: {
      size_t i = 0;
      while (i < buf_.size() && is_blank(buf_[i])) ++i;
      if (i == buf_.size()) {
        if (!at_end) return false;
        mode_ = Mode::kPlain;  // a blank output is its own content
        return true;
      }
      mode_ = Mode::kRegion;
      region_ = i;
      return true;
    }
    case Mode::kRegion: return scan_region(ScanShape::kRegion, at_end, out);
    case Mode::kBlock: return scan_region(ScanShape::kBlock, at_end, out);
    case Mode::kValues: return scan_region(ScanShape::kValues, at_end, out);
    case Mode::kText:
      text_step(at_end, out);
      return mode_ != Mode::kText;
    case Mode::kPlain:
      content(std::string_view(buf_).substr(pos_), out);
      pos_ = buf_.size();
      return false;
  }
  return false;
}

bool ToolCallStream::scan_region(ScanShape shape, bool at_end, std::vector<ToolCallEvent>* out) {
  const CallsScan scan = scan_tool_calls(std::string_view(buf_).substr(region_), shape,
                                         format_ == ToolCallFormat::kLlama3, at_end, *known_);
  if (scan.status == ScanStatus::kBad) {
    fail();
    return true;
  }
  send_calls(scan.calls, out);
  if (scan.status == ScanStatus::kMore) return false;
  if (shape == ScanShape::kBlock) {  // back to content after </tool_call>
    call_base_ += scan.calls.size();
    pos_ = consumed_ = region_ + scan.end;
    after_block_ = true;
    mode_ = Mode::kText;
    return true;
  }
  pos_ = consumed_ = buf_.size();  // a region / [TOOL_CALLS] list completes only at the end
  mode_ = Mode::kPlain;
  return false;
}

void ToolCallStream::text_step(bool at_end, std::vector<ToolCallEvent>* out) {
  if (marker_.empty()) {  // no marker in this format: the rest is content
    mode_ = Mode::kPlain;
    return;
  }
  std::string_view rest = std::string_view(buf_).substr(pos_);
  if (after_block_) {  // blanks after a block are trimmed whatever follows
    size_t k = 0;
    while (k < rest.size() && is_blank(rest[k])) ++k;
    pos_ += k;
    rest.remove_prefix(k);
  }
  const size_t at = rest.find(marker_);
  const std::string_view piece = at != std::string_view::npos ? rtrim(rest.substr(0, at))
                                                              : rest.substr(0, rest.size() - (at_end ? 0 : held_tail(rest, marker_)));
  if (!piece.empty()) {
    if (after_block_ && content_sent_) content("\n", out);  // pieces between blocks are joined by "\n"
    content(piece, out);
    after_block_ = false;
  }
  if (num_announced_ == 0) sent_upto_ = pos_ + piece.size();
  if (at == std::string_view::npos) {
    pos_ = consumed_ = pos_ + piece.size();
    return;
  }
  region_ = consumed_ = pos_ + at + marker_.size();
  mode_ = format_ == ToolCallFormat::kHermes ? Mode::kBlock : Mode::kValues;
}

void ToolCallStream::send_calls(const std::vector<CallScan>& calls, std::vector<ToolCallEvent>* out) {
  for (size_t j = 0; j < calls.size(); ++j) {
    const CallScan& c = calls[j];
    const size_t index = call_base_ + j;
    if (index >= num_announced_) {  // announced in order, once the name and arguments have begun
      if (!c.has_name || (c.args == CallScan::Args::kNone && !c.complete)) return;
      if (c.args == CallScan::Args::kString && !c.args_complete) return;  // its text is checked whole
      if (!parallel_ && index > 0) return;  // parallel_tool_calls false: the first call only
      out->push_back({ToolCallEvent::Kind::kCallStart, index, c.name});
      num_announced_ = index + 1;
      args_sent_.push_back(0);
      args_done_.push_back(false);
    }
    if (args_done_[index]) continue;
    std::string fragment;
    switch (c.args) {
      case CallScan::Args::kObject: {
        const size_t settled = c.args_end - c.args_begin;
        fragment = buf_.substr(region_ + c.args_begin + args_sent_[index], settled - args_sent_[index]);
        args_sent_[index] = settled;
        args_done_[index] = c.args_complete;
        consumed_ = std::max(consumed_, region_ + c.args_end);
        break;
      }
      case CallScan::Args::kString:
        if (c.args_complete) fragment = c.args_text;
        args_done_[index] = c.args_complete;
        break;
      case CallScan::Args::kNone:
        if (c.complete) fragment = "{}";
        args_done_[index] = c.complete;
        break;
    }
    if (fragment.empty()) continue;
    if (!out->empty() && out->back().kind == ToolCallEvent::Kind::kArguments && out->back().index == index) {
      out->back().text += fragment;
    } else {
      out->push_back({ToolCallEvent::Kind::kArguments, index, std::move(fragment)});
    }
  }
}

void ToolCallStream::fail() {
  if (num_announced_ == 0 && mode_ == Mode::kRegion) {  // not a JSON region: look for the marker
    mode_ = Mode::kText;
    pos_ = sent_upto_ = 0;
    return;
  }
  mode_ = Mode::kPlain;
  if (num_announced_ == 0) {  // malformed before any call: the whole text is content
    pos_ = sent_upto_;
    return;
  }
  broken_ = true;  // a sent call cannot be taken back: the rest goes out as content
  pos_ = consumed_;
}

void ToolCallStream::content(std::string_view text, std::vector<ToolCallEvent>* out) {
  if (text.empty()) return;
  content_sent_ = true;
  if (!out->empty() && out->back().kind == ToolCallEvent::Kind::kContent) {
    out->back().text += text;
  } else {
    out->push_back({ToolCallEvent::Kind::kContent, 0, std::string(text)});
  }
}

}  // namespace tessera::server

// StructuredOutputs through its public calls, on a hand-built SentencePiece vocabulary:
//   id: 0 <unk>  1 <s>  2 </s> (EOS)  3 a  4 b  5 c  6 ab
// and the choice grammar {"ab", "ac"}: at the root "a" and "ab" are allowed, after "a" "b" and
// "c", after "ab" (complete) only EOS.
#include <gtest/gtest.h>

#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "structured/structured_outputs.h"

namespace tessera::structured {
namespace {

constexpr int32_t kVocab = 7;

struct Fixture {
  std::vector<uint8_t> bytes;  // the GGUF, alive as long as the parsed file
  Result<gguf::GgufFile> file = make_error(ErrorCode::kInternal, "unset");
  std::unique_ptr<tokenizer::Tokenizer> tok;
};

std::unique_ptr<Fixture> make_tokenizer() {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a", "b", "c", "ab"};
  const std::vector<float> scores = {0, 0, 0, -1, -1, -1, -2};
  const std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1};  // unknown, control x2, normal
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_float_array("tokenizer.ggml.scores", scores);
  w.set_int32_array("tokenizer.ggml.token_type", types);
  w.set_uint32("tokenizer.ggml.bos_token_id", 1);
  w.set_uint32("tokenizer.ggml.eos_token_id", 2);
  auto f = std::make_unique<Fixture>();
  auto bytes = w.to_bytes();
  TESSERA_CHECK(bytes.ok(), "to_bytes");
  f->bytes = std::move(*bytes);
  f->file = gguf::GgufFile::parse(MappedFile::from_memory(f->bytes.data(), f->bytes.size()));
  TESSERA_CHECK(f->file.ok(), "parse");
  auto tok = tokenizer::Tokenizer::from_gguf(*f->file);
  TESSERA_CHECK(tok.ok(), "tokenizer");
  f->tok = std::make_unique<tokenizer::Tokenizer>(std::move(*tok));
  return f;
}

StructuredOutput choice_ab_ac() {
  StructuredOutput so;
  so.kind = StructuredOutput::Kind::kChoice;
  so.choices = {"ab", "ac"};
  return so;
}

// The allowed ids of row r of a mask span (one word per row: 7 tokens).
std::vector<int32_t> row_ids(std::span<const uint64_t> masks, size_t r) {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < kVocab; ++t) {
    if ((masks[r] >> t) & 1u) ids.push_back(t);
  }
  return ids;
}

sched::ScheduledSeq seq(int64_t id, int32_t sample, std::vector<int32_t> tokens, int32_t num_drafts) {
  sched::ScheduledSeq s;
  s.seq_id = id * 10 + sample;
  s.request_id = id;
  s.sample_index = sample;
  s.token_ids = std::move(tokens);
  s.num_spec_tokens = num_drafts;
  s.needs_logits = true;
  return s;
}

sched::RequestUpdate update(int64_t id, int32_t sample, std::vector<int32_t> tokens) {
  sched::RequestUpdate u;
  u.seq_id = id * 10 + sample;
  u.request_id = id;
  u.sample_index = sample;
  u.new_token_ids = std::move(tokens);
  return u;
}

using Ids = std::vector<int32_t>;

TEST(StructuredOutputs, CompileCachesAndRefuses) {
  auto f = make_tokenizer();
  StructuredOutputs so(*f->tok, kVocab);
  auto none = so.compile(StructuredOutput{});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value(), nullptr);
  auto a = so.compile(choice_ab_ac());
  auto b = so.compile(choice_ab_ac());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.value().get(), b.value().get());  // one compile per text
  StructuredOutput bad;
  bad.kind = StructuredOutput::Kind::kRegex;
  bad.text = "(ab";
  EXPECT_FALSE(so.compile(bad).ok());
}

TEST(StructuredOutputs, MasksWalkDraftsAndRollBack) {
  auto f = make_tokenizer();
  StructuredOutputs so(*f->tok, kVocab);
  so.add(1, so.compile(choice_ab_ac()).value(), 1);
  so.add(2, nullptr, 1);  // unconstrained
  sched::SchedulerOutput out;
  out.seqs.push_back(seq(1, 0, {1, 3, 4}, 2));  // drafts "a", "b": both allowed
  out.seqs.push_back(seq(2, 0, {1}, 0));
  sched::ScheduledSeq chunk = seq(3, 0, {1, 1}, 0);
  chunk.needs_logits = false;
  out.seqs.push_back(chunk);
  so.start_masks(out);
  auto masks = so.wait_masks();
  ASSERT_EQ(masks.size(), 3u);
  ASSERT_EQ(masks[0].size(), 3u);  // 3 rows of one word
  EXPECT_EQ(row_ids(masks[0], 0), (Ids{3, 6}));
  EXPECT_EQ(row_ids(masks[0], 1), (Ids{4, 5}));
  EXPECT_EQ(row_ids(masks[0], 2), (Ids{2}));  // "ab" is complete: only EOS
  EXPECT_TRUE(masks[1].empty());
  EXPECT_TRUE(masks[2].empty());

  // Rolled back: the same root mask; a refused first draft ("b") ends the walk, later rows repeat.
  out.seqs = {seq(1, 0, {1, 4, 3}, 2)};
  so.start_masks(out);
  masks = so.wait_masks();
  ASSERT_EQ(masks[0].size(), 3u);
  for (size_t r = 0; r < 3; ++r) EXPECT_EQ(row_ids(masks[0], r), (Ids{3, 6})) << r;
}

TEST(StructuredOutputs, CommitEndsCompleteAndRefusedSequences) {
  auto f = make_tokenizer();
  StructuredOutputs so(*f->tok, kVocab);
  const Grammar g = so.compile(choice_ab_ac()).value();
  so.add(1, g, 2);
  so.add(2, g, 1);
  std::vector<sched::RequestUpdate> ups = {update(1, 0, {3}), update(2, 0, {4})};
  const std::vector<SequenceEnd>& ends = so.commit(ups);
  ASSERT_EQ(ends.size(), 1u);  // "a" goes on; "b" is outside the grammar
  EXPECT_EQ(ends[0].seq_id, 20);
  EXPECT_EQ(ends[0].status, sched::RequestStatus::kFinishedError);
  EXPECT_STREQ(ends[0].error, "internal error: a sampled token is outside the request's grammar");

  // Sample 1 of request 1 is still at the root while sample 0 is past "a".
  sched::SchedulerOutput out;
  out.seqs = {seq(1, 0, {3}, 0), seq(1, 1, {1}, 0)};
  so.start_masks(out);
  auto masks = so.wait_masks();
  EXPECT_EQ(row_ids(masks[0], 0), (Ids{4, 5}));
  EXPECT_EQ(row_ids(masks[1], 0), (Ids{3, 6}));

  ups = {update(1, 0, {5})};  // "ac": complete
  const std::vector<SequenceEnd>& done = so.commit(ups);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].seq_id, 10);
  EXPECT_EQ(done[0].status, sched::RequestStatus::kFinishedStopped);

  so.remove(1);
  EXPECT_FALSE(so.has(1));
  out.seqs = {seq(1, 1, {1}, 0)};
  so.start_masks(out);
  EXPECT_TRUE(so.wait_masks()[0].empty());  // gone: unconstrained
}

}  // namespace
}  // namespace tessera::structured

// EngineImpl: the Engine of include/tessera/engine.h. One engine thread owns the scheduler, the
// runner and every request's state; other threads talk to it only through the message queue
// (add / abort), the request streams and the metrics snapshot.
//
//   loop:  drain messages (add, abort)          <- submit()/abort() from any thread
//          out     = scheduler.schedule()
//          result  = runner.execute(out)         forward + sampling (+ speculative verification)
//          updates = scheduler.update_from_output(out, result)
//          per update: detokenize, stop strings, push RequestOutput to the stream, metrics
//          spec->after_step: drafts for the next step (speculative decoding, speculative/spec_decoder.h)
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/engine_config.h"
#include "engine/engine_requests.h"
#include "grammar/compiled_grammar.h"
#include "speculative/spec_decoder.h"
#include "model/kv_storage.h"
#include "model/llama_model.h"
#include "runner/model_runner.h"
#include "sched/scheduler.h"
#include "tessera/engine.h"
#include "tokenizer/chat_render.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

class EngineImpl final : public Engine {
 public:
  static Result<std::unique_ptr<EngineImpl>> create_impl(const EngineConfig& config);
  ~EngineImpl() override;

  const ModelInfo& model_info() const override { return info_; }
  std::vector<int32_t> tokenize(const std::string& text, bool add_bos, bool parse_special) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  std::string token_piece(int32_t id) const override;
  Result<ChatPrompt> chat_prompt(const ChatTemplateInput& input, bool add_bos) const override;
  Result<std::shared_ptr<RequestStream>> submit(GenerateRequest request) override;
  Result<std::vector<std::shared_ptr<RequestStream>>> submit_all(std::vector<GenerateRequest> requests) override;
  // Validates one request and builds its kAdd message (not queued); num_before: requests of the
  // same submit_all() ahead of it, for the queue limit.
  Result<EngineMessage> make_add_message(GenerateRequest request, int64_t num_before);
  void abort(int64_t request_id) override;
  MetricsSnapshot metrics() const override;
  int32_t num_unfinished_requests() const override { return num_unfinished_.load(); }
  void shutdown(std::chrono::milliseconds grace) override;

  // Runs one step on the calling thread (tests drive the engine without its thread).
  bool step();  // one schedule -> execute -> update; false when nothing ran

 private:
  EngineImpl() = default;
  void loop();
  void drain_messages();
  // Applies a step's updates to the requests (outputs, stop strings, metrics); `finished` gets the
  // sequences whose sample ended, `decoding` (seq id, request id) those still running.
  void handle_updates(const sched::SchedulerOutput& out, const RunnerOutput& result,
                      const std::vector<sched::RequestUpdate>& updates, std::vector<int64_t>& finished,
                      std::vector<std::pair<int64_t, int64_t>>& decoding);
  // The sequences still decoding as the SpecDecoder reads them (spans into requests_).
  std::vector<speculative::SpecSequence> spec_sequences(const std::vector<std::pair<int64_t, int64_t>>& decoding,
                                                 const std::vector<sched::RequestUpdate>& updates) const;
  void finish_request_state(ActiveRequest& req);
  // Ends every sample of `req` not yet finished with a final event (reason, error text, counts):
  // an abort, or a request the engine fails.
  void end_unfinished_samples(ActiveRequest& req, FinishReason reason, const std::string& error);
  // Ends every request whose logits rows were not usable this step (RunnerOutput::nonfinite_logits)
  // with an error event; called before the scheduler consumes the step, which then skips them.
  void fail_nonfinite_requests(const sched::SchedulerOutput& out, const RunnerOutput& result);
  void publish_metrics();
  // Drains the prefix cache's stored/removed record into one KvEventBatch for config_.on_kv_events.
  void publish_kv_events();
  // Structured outputs (engine_grammar.cpp): compile and attach a request's grammar at submit;
  // start the step's token masks on a helper thread while the forward runs; the masks of a
  // scheduled sequence (waits for them), empty when unconstrained.
  Status attach_grammar(ActiveRequest& req);
  void start_grammar_masks(const sched::SchedulerOutput& out);
  void wait_grammar_masks();
  std::span<const uint64_t> grammar_masks_of(const sched::ScheduledSeq& s) const;

  EngineConfig config_;
  ModelInfo info_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  // The model's chat template, parsed once on first use (Jinja, or the family-table fallback).
  const tokenizer::ChatRenderer& chat_renderer() const;
  mutable std::once_flag chat_renderer_once_;
  mutable std::unique_ptr<tokenizer::ChatRenderer> chat_renderer_;
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<speculative::SpecDecoder> spec_;  // speculative decoding; null when off
  std::vector<int32_t> eos_ids_;

  // Engine-thread state.
  std::unordered_map<int64_t, std::unique_ptr<ActiveRequest>> requests_;  // by request id
  MetricsSnapshot live_metrics_;
  // Structured outputs: compiled grammars by text (thread-safe: submit() compiles), and the
  // step's mask jobs (sample, its draft tokens) run by grammar_future_ during the forward.
  std::unique_ptr<grammar::GrammarCache> grammar_cache_;
  struct GrammarJob {
    SampleState* sample;
    std::span<const int32_t> drafts;
  };
  std::vector<GrammarJob> grammar_jobs_;
  std::future<void> grammar_future_;
  std::vector<SequenceSampling> sampling_;  // step(): per scheduled sequence, its request's views

  // Shared with client threads.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<EngineMessage> messages_;
  MetricsSnapshot published_metrics_;
  std::atomic<int64_t> next_request_id_{1};
  std::atomic<int32_t> num_unfinished_{0};
  std::atomic<bool> accepting_{true};
  std::atomic<bool> stop_{false};
  std::atomic<bool> drain_then_stop_{false};
  std::thread thread_;
};

}  // namespace tessera

// EngineImpl: the Engine of include/tessera/engine.h. One engine thread owns the scheduler, the
// runner, the managers and every request's state; other threads talk to it only through the
// message queue (add / abort), the request streams and the metrics snapshot.
//
//   loop:  drain messages (add, abort)          <- submit()/abort() from any thread
//          step():
//            out      = scheduler.schedule()
//            structured.start_masks(out)         token masks on its worker, overlapping the forward
//            views    = sampling views of out    (request state, spans; nothing copied)
//            runner.forward(out); masks = structured.wait_masks()
//            result   = runner.sample(out, views + masks)   (+ speculative verification)
//            updates  = scheduler.update_from_output(out, result)
//            ended    = structured.commit(updates)          grammars complete or refused
//            emit_step_outputs: detokenize, stop strings, RequestOutput to the streams
//            spec.after_step: drafts for the next step (speculative/spec_decoder.h)
//            metrics.publish
//
// Where each concern lives (one file and header each):
//   engine_impl.cpp      create (the model, tokenizer, scheduler, runner, managers), the
//                        tokenizer and chat-template facade
//   engine_startup.h     what create derives and prints: ModelInfo, the start-up lines
//   engine_loop.cpp      submit and validation, abort, shutdown, the thread loop, request ends
//   engine_step.cpp      step()
//   engine_outputs.h     a step's updates into stream events (emit_step_outputs)
//   engine_metrics.h     counters, histograms and their published copy; KV events batches
//   engine_disk_tier.h   the KV disk tier's engine side: writes of cached blocks, parked
//                        requests whose prefix is read back from disk
//   engine_requests.h    per-request state and the views of it handed down
//   structured/          structured outputs (StructuredOutputs); speculative/ speculation
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/engine_config.h"
#include "engine/engine_disk_tier.h"
#include "engine/engine_loras.h"
#include "engine/engine_metrics.h"
#include "engine/engine_outputs.h"
#include "engine/engine_requests.h"
#include "model/kv_storage.h"
#include "model/llama_model.h"
#include "runner/model_runner.h"
#include "sched/scheduler.h"
#include "speculative/spec_decoder.h"
#include "structured/structured_outputs.h"
#include "tessera/engine.h"
#include "tokenizer/chat_render.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

class EngineImpl final : public Engine {
 public:
  // Engine::create's body. `adjust`, when given, changes the inner configs derived from `config`
  // before anything is built from them: what no public option reaches (tests: a synthetic
  // proposer with fixed k through speculative::SpecDecoderConfig::draft_filter, a broken rejection
  // sampler through RunnerConfig::rejection_fault).
  static Result<std::unique_ptr<EngineImpl>> create_impl(const EngineConfig& config,
                                                          const std::function<void(EngineConfigs&)>& adjust = nullptr);
  ~EngineImpl() override;

  const ModelInfo& model_info() const override { return info_; }
  std::vector<int32_t> tokenize(const std::string& text, bool add_bos, bool parse_special) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  std::string token_piece(int32_t id) const override;
  Result<ChatPrompt> chat_prompt(const ChatTemplateInput& input, bool add_bos) const override;
  Result<std::shared_ptr<RequestStream>> submit(GenerateRequest request) override;
  Result<std::vector<std::shared_ptr<RequestStream>>> submit_all(std::vector<GenerateRequest> requests) override;
  void abort(int64_t request_id) override;
  MetricsSnapshot metrics() const override {
    MetricsSnapshot m = metrics_->snapshot();
    if (disk_) disk_->fill_metrics(m);  // live: the I/O thread's writes land between steps
    return m;
  }
  int32_t num_unfinished_requests() const override { return num_unfinished_.load(); }
  void shutdown(std::chrono::milliseconds grace) override;
  Status load_lora_adapter(const std::string& name, const std::string& path) override;
  Status unload_lora_adapter(const std::string& name) override;
  std::vector<LoraAdapterInfo> lora_adapters() const override { return loras_->registry().list(); }

 private:
  EngineImpl() = default;
  // engine_loop.cpp
  // Validates one request and builds its kAdd message (not queued); num_before: requests of the
  // same submit_all() ahead of it, for the queue limit.
  Result<EngineMessage> make_add_message(GenerateRequest request, int64_t num_before);
  void loop();
  void drain_messages();
  // Hands a kAdd message's request to the scheduler (or fails it there); false, leaving the message
  // as it was, when its adapter would be one more than max_loras among the requests in flight.
  bool admit(EngineMessage& msg);
  void finish_request_state(ActiveRequest& req);
  // Ends every sample of `req` not yet finished with a final event (reason, error text, counts):
  // an abort, or a request the engine fails.
  void end_unfinished_samples(ActiveRequest& req, FinishReason reason, const std::string& error);
  // Ends every request whose logits rows were not usable this step (RunnerOutput::nonfinite_logits)
  // with an error event; called before the scheduler consumes the step, which then skips them.
  void fail_nonfinite_requests(const sched::SchedulerOutput& out, const RunnerOutput& result);

  // engine_step.cpp
  bool step();  // one schedule -> forward -> sample -> update; false when nothing ran
  void note_first_scheduled(const sched::SchedulerOutput& out);
  // sampling_[i]: what sampling reads of out.seqs[i] (views of its request's state).
  void build_sampling_views(const sched::SchedulerOutput& out);
  // Speculation's one call per step: verifications, forgetting, drafts for the next step, timing.
  void after_step_speculation(const sched::SchedulerOutput& out, const RunnerOutput& result,
                              const std::vector<sched::RequestUpdate>& updates, Clock::time_point step_start);
  void publish();  // the step's KV events and metrics

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
  std::unique_ptr<speculative::SpecDecoder> spec_;             // speculative decoding; null when off
  std::unique_ptr<structured::StructuredOutputs> structured_;  // grammars, matchers, token masks
  std::unique_ptr<EngineMetrics> metrics_;
  std::unique_ptr<EngineDiskTier> disk_;  // KV disk tier (EngineConfig::kv_cache_dir); null when off
  std::vector<int32_t> eos_ids_;
  std::unique_ptr<EngineLoras> loras_;      // LoRA adapters: registry, max_loras admission, events

  // Engine-thread state.
  RequestMap requests_;
  std::vector<SequenceSampling> sampling_;  // step(): per scheduled sequence, its request's views
  StepOutputs step_outputs_;                // step(): what emit_step_outputs left

  // Shared with client threads.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<EngineMessage> messages_;
  std::atomic<int64_t> next_request_id_{1};
  std::atomic<int32_t> num_unfinished_{0};
  std::atomic<bool> accepting_{true};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tessera

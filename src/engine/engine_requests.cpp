// The per-request views the engine hands down with a step: see engine_requests.h.
#include "engine/engine_requests.h"

namespace tessera {

sched::NewRequest scheduler_request_of(const ActiveRequest& req, std::vector<int32_t> eos_token_ids,
                                       std::string cache_salt) {
  sched::NewRequest nr;
  nr.id = req.id;
  nr.prompt = req.prompt;  // the holder, not the ids: the scheduler's sequences share this copy
  nr.stop = sched::stop_params_from(req.params, std::move(eos_token_ids));
  nr.num_samples = req.params.n;
  nr.cache_salt = std::move(cache_salt);
  return nr;
}

SequenceSampling sampling_view_of(const ActiveRequest& req, int32_t sample_index) {
  SequenceSampling ss;
  ss.params = &req.params;
  ss.rngs = req.rng_ptrs;
  ss.prompt = *req.prompt;
  ss.output = req.samples[static_cast<size_t>(sample_index)].output_ids;
  return ss;
}

speculative::SpecSequence spec_sequence_of(const ActiveRequest& req, int64_t seq_id, int32_t sample_index) {
  return {seq_id, *req.prompt, req.samples[static_cast<size_t>(sample_index)].output_ids, &req.params,
          req.cache_extra_key};
}

}  // namespace tessera

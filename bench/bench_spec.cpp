// B9 speculative decoding, through the public Engine API. Each workload runs tessera with and
// without speculation interleaved (off, on, off, on, ...) on the same weights, threads and prompts,
// greedy, and prints: alpha (accepted / proposed), mean tokens per target verification step and
// (1 - a^(k+1)) / (1 - a) for the measured a, tok/s off and on, and the on/off ratio (median and
// min-max over rounds). Tokens/s counts generated tokens after the first one over the wall time to the last
// token of each group of `batch` requests, measured from its first token (decode only).
//
//   bench_spec [--model M] [--draft-target T --draft D] [--threads N] [--rounds R]
//              [--max-tokens N] [--k K | --ks 2,4,8] [--only ngram|draft]
//              [--batch 1|8] [--prompts grounded|open]      (one workload or a few)
//              [--json-out FILE]                            (every row as JSON, for scripts)
// Greedy outputs with speculation on must equal those with it off (lossless): the "same output"
// column counts the requests that match, and a mismatch makes the exit status 3. The last table
// on stdout (workload x batch x proposer, on/off median (min-max)) is the one to embed.
// Engines keep their defaults otherwise: adaptive k and the wall-clock speed guard are on, so the
// "on" column is what a user gets. α = accepted / proposed; α_pos = the per-position fit
// (accepted at position i / drafts that reached i), the i.i.d. acceptance the formula assumes.
// The load average (/proc/loadavg) is printed before and after: numbers on a busy box are noise.
// After the main table, the parts of a speculative step as the "on" engine's cost model measured
// them (decode step time by tokens in the step, proposer forward, draft catch-up per token, all
// relative to a plain 1-token step), the proposer's share of the decode time and the draft's
// catch-up tokens and prefix-cache hits.
// Workloads: grounded prompts (code edits, summaries that quote, repeats: the answer copies the
// prompt) and open-ended ones (low alpha), each at batch 1 (4 prompts) and 8 (8 prompts), with
// the n-gram proposer on --model and with the draft model (target T, draft D: e.g. Qwen2.5-Coder
// 1.5B and 0.5B, or an F16 target and its Q4_0 made with `tessera quantize`).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tessera/engine.h"

using namespace tessera;

namespace {

// Grounded for a coder model: the answer copies the prompt (code edits that rename or annotate
// code given in the prompt, summaries that reuse its sentences, verbatim repeats). The first four
// (the batch-1 workloads) are one of each kind.
const char* kGrounded[] = {
    "Rewrite this function renaming the variable `total` to `running_sum`. Output only the code.\n\n"
    "def average(values):\n    total = 0\n    count = 0\n    for v in values:\n        total += v\n"
    "        count += 1\n    if count == 0:\n        return 0.0\n    return total / count\n",
    "Summarize this bug report in two sentences, reusing its own wording:\n\nWhen the user uploads a "
    "file larger than 10 MB, the server returns an error 500 instead of a clear message. The upload "
    "handler reads the whole file into memory before checking its size, so large files exhaust the "
    "worker's memory and the worker is restarted.",
    "Rename the function `calc` to `compute_area` everywhere in this code and print the full code "
    "back:\n\n#include <cstdio>\n\ndouble calc(double w, double h) {\n  return w * h;\n}\n\n"
    "int main() {\n  double a = calc(3.0, 4.0);\n  double b = calc(5.0, 6.0);\n  std::printf(\"%f %f\\n\", a, b);\n"
    "  return 0;\n}\n",
    "Repeat the following paragraph word for word:\n\nThe river wound slowly through the valley, past "
    "old stone bridges and quiet farms. In the spring the water rose and covered the low fields, and "
    "in the summer children swam near the mill.",
    "Add type hints to this function and change nothing else; print the whole function:\n\n"
    "def merge(left, right):\n    result = []\n    i = 0\n    j = 0\n    while i < len(left) and j < len(right):\n"
    "        if left[i] <= right[j]:\n            result.append(left[i])\n            i += 1\n"
    "        else:\n            result.append(right[j])\n            j += 1\n    return result\n",
    "In this JavaScript code rename `data` to `items` and return the edited code only:\n\n"
    "function countValid(data) {\n  let n = 0;\n  for (const d of data) {\n    if (d.valid && d.score > 10) {\n"
    "      n += 1;\n    }\n  }\n  return n;\n}\n",
    "Summarize by quoting the key sentences: The library will be closed on Monday for repairs to the "
    "roof. The library will reopen on Tuesday at nine in the morning. Books due on Monday may be "
    "returned on Tuesday without a fine.",
    "Rename the class `Foo` to `Counter` in this code and print it back:\n\nclass Foo:\n"
    "    def __init__(self):\n        self.count = 0\n\n    def increment(self):\n        self.count += 1\n"
    "        return self.count\n\nfoo = Foo()\nfoo.increment()\n",
};
const char* kOpen[] = {
    "Write a short poem about the sea.",   "What would you do with a free day?",
    "Invent a name for a new color.",      "Tell me a fun fact about space.",
    "Describe your ideal breakfast.",      "Give me three ideas for a party game.",
    "What makes a good friend?",           "Describe a city in the far future.",
};

std::string g_parts;  // rows of the parts table, printed after the main one

struct Options {
  std::string model = TESSERA_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string draft_target;  // F16 target for the draft workload
  std::string draft;         // quantized draft
  int32_t threads = 2, rounds = 3, max_tokens = 64, k = 4;
  std::vector<int32_t> ks;  // --ks: run every workload for each k
  std::string only;
  int32_t batch = 0;     // --batch: only workloads of this batch (0 = all)
  std::string prompts;   // --prompts: only "grounded" or "open" workloads
  std::string json_out;  // --json-out: every row as JSON (for scripts that embed the table)
};

struct Measure {
  double seconds = 0.0;
  int64_t tokens = 0;
  MetricsSnapshot metrics;  // delta of this run
  std::vector<std::vector<int32_t>> outputs;  // [request] generated token ids (greedy: compared)
};

// One workload's result: the markdown row's figures, also written by --json-out.
struct Row {
  std::string name, proposer;
  size_t batch = 0;
  int32_t k = 0;
  double k_mean = 0, alpha = 0, alpha_pos = 0, tokens_per_step = 0, tps_off = 0, tps_on = 0;
  std::vector<double> ratios;  // on / off per round
  int32_t mismatches = 0;      // requests whose greedy output differed between on and off
  int32_t requests = 0;        // requests compared (all rounds)
};
std::vector<Row> g_rows;

MetricsSnapshot delta(const MetricsSnapshot& a, const MetricsSnapshot& b) {  // b - a (spec counters)
  MetricsSnapshot d;
  d.spec_num_drafts = b.spec_num_drafts - a.spec_num_drafts;
  d.spec_num_draft_tokens = b.spec_num_draft_tokens - a.spec_num_draft_tokens;
  d.spec_num_accepted_tokens = b.spec_num_accepted_tokens - a.spec_num_accepted_tokens;
  d.num_steps = b.num_steps - a.num_steps;
  d.spec_propose_seconds = b.spec_propose_seconds - a.spec_propose_seconds;
  d.spec_catch_up_tokens = b.spec_catch_up_tokens - a.spec_catch_up_tokens;
  d.spec_draft_prefix_hit_tokens = b.spec_draft_prefix_hit_tokens - a.spec_draft_prefix_hit_tokens;
  d.spec_accepted_per_position = b.spec_accepted_per_position;
  for (size_t i = 0; i < d.spec_accepted_per_position.size() && i < a.spec_accepted_per_position.size(); ++i) {
    d.spec_accepted_per_position[i] -= a.spec_accepted_per_position[i];
  }
  return d;
}

Measure run(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, size_t batch, int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  Measure m;
  const MetricsSnapshot before = engine.metrics();
  m.outputs.resize(prompts.size());
  using SteadyClock = std::chrono::steady_clock;
  for (size_t first = 0; first < prompts.size(); first += batch) {
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (size_t i = first; i < std::min(prompts.size(), first + batch); ++i) {
      streams.push_back(engine.submit({prompts[i], p, ""}).value());
    }
    // Decode time of the group: from the last request's first token (every prompt prefilled) to
    // the last token; the first token of each request is not counted.
    std::vector<SteadyClock::time_point> first_token(streams.size()), last_token(streams.size());
    for (size_t i = 0; i < streams.size(); ++i) {
      bool first_event = true;
      while (auto ev = streams[i]->next()) {
        const auto now = SteadyClock::now();
        const auto n = static_cast<int64_t>(ev->token_ids.size());
        auto& out = m.outputs[first + i];
        out.insert(out.end(), ev->token_ids.begin(), ev->token_ids.end());
        if (first_event && n > 0) {
          first_token[i] = now;
          m.tokens += n - 1;
          first_event = false;
        } else {
          m.tokens += n;
        }
        last_token[i] = now;
      }
    }
    // Streams are read in order, so a later stream's first event may be seen late: use the
    // earliest possible start, the first stream's first token.
    const auto start = *std::min_element(first_token.begin(), first_token.end());
    const auto end = *std::max_element(last_token.begin(), last_token.end());
    m.seconds += std::chrono::duration<double>(end - start).count();
  }
  for (int i = 0; i < 100 && engine.num_unfinished_requests() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the last step's metrics
  m.metrics = delta(before, engine.metrics());
  return m;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void workload(const char* name, const char* proposer, const std::string& model, const std::string& speculative, const std::string& draft,
              const std::vector<std::string>& texts, size_t batch, const Options& o) {
  if ((o.batch > 0 && static_cast<size_t>(o.batch) != batch) ||
      (!o.prompts.empty() && std::string(name).find(o.prompts) == std::string::npos)) {
    return;
  }
  EngineConfig base;
  base.model_path = model;
  base.num_threads = o.threads;
  base.kv_cache_bytes = int64_t{256} << 20;
  base.max_model_len = 1024;
  base.max_num_seqs = 16;
  base.num_speculative_tokens = o.k;
  EngineConfig spec = base;
  spec.speculative = speculative;
  spec.draft_model_path = draft;
  auto off = Engine::create(base);
  auto on = Engine::create(spec);
  if (!off || !on) {
    std::fprintf(stderr, "%s: %s\n", name, (!off ? off.error() : on.error()).message.c_str());
    return;
  }
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& t : texts) {
    prompts.push_back((*off)->chat_prompt(chat_template_input({{"user", t}}), false).value().ids);
  }
  // Warm-up at the workload's batch (page in the weights, first-touch the KV and workspace of a
  // full batch: warmed with one sequence only, round 1 of the off arm ran slower at batch 8 and
  // read as a 1.2-1.3x gain for an "on" arm that never speculated).
  run(**off, prompts, batch, 8);
  run(**on, prompts, batch, 8);
  std::vector<double> ratios;
  double tps_off = 0, tps_on = 0, seconds_on = 0;
  int32_t mismatches = 0, compared = 0;
  MetricsSnapshot total;
  total.spec_accepted_per_position.assign(static_cast<size_t>(o.k), 0);
  for (int r = 0; r < o.rounds; ++r) {
    const Measure a = run(**off, prompts, batch, o.max_tokens);
    const Measure b = run(**on, prompts, batch, o.max_tokens);
    const double x = a.tokens / a.seconds, y = b.tokens / b.seconds;
    tps_off += x / o.rounds;
    tps_on += y / o.rounds;
    ratios.push_back(y / x);
    // Lossless: greedy speculation must emit exactly what plain decoding emits.
    for (size_t i = 0; i < a.outputs.size(); ++i) mismatches += a.outputs[i] != b.outputs[i];
    compared += static_cast<int32_t>(a.outputs.size());
    total.spec_num_drafts += b.metrics.spec_num_drafts;
    total.spec_num_draft_tokens += b.metrics.spec_num_draft_tokens;
    total.spec_num_accepted_tokens += b.metrics.spec_num_accepted_tokens;
    total.spec_propose_seconds += b.metrics.spec_propose_seconds;
    total.spec_catch_up_tokens += b.metrics.spec_catch_up_tokens;
    total.spec_draft_prefix_hit_tokens += b.metrics.spec_draft_prefix_hit_tokens;
    seconds_on += b.seconds;
    for (size_t i = 0; i < total.spec_accepted_per_position.size() && i < b.metrics.spec_accepted_per_position.size(); ++i) {
      total.spec_accepted_per_position[i] += b.metrics.spec_accepted_per_position[i];
    }
  }
  const double alpha = total.spec_num_draft_tokens ? double(total.spec_num_accepted_tokens) / total.spec_num_draft_tokens : 0.0;
  const double k_mean = total.spec_num_drafts ? double(total.spec_num_draft_tokens) / total.spec_num_drafts : 0.0;
  const double tps_step = total.spec_num_drafts ? double(total.spec_num_accepted_tokens + total.spec_num_drafts) / total.spec_num_drafts : 0.0;
  // Per-position conditional acceptance (a geometric fit): accepted at p / reached p.
  double reached = double(total.spec_num_drafts), acc_sum = 0.0;
  for (size_t p = 0; p < total.spec_accepted_per_position.size(); ++p) {
    acc_sum += total.spec_accepted_per_position[p];
    if (p + 1 < total.spec_accepted_per_position.size()) reached += total.spec_accepted_per_position[p];
  }
  const double alpha_cond = reached > 0 ? acc_sum / reached : 0.0;
  auto formula = [&](double a) {
    return a >= 1.0 ? k_mean + 1.0 : (1.0 - std::pow(a, k_mean + 1.0)) / (1.0 - a);
  };
  std::string per_pos;
  for (int64_t n : total.spec_accepted_per_position) per_pos += std::to_string(n) + " ";
  std::printf("| %-28s | %5zu | %4.1f | %5.3f | %5.3f | %5.2f | %5.2f | %5.2f | %6.1f | %6.1f | %5.2fx | %4.2f-%4.2f | %d/%d | %s|\n", name,
              batch, k_mean, alpha, alpha_cond, tps_step, formula(alpha), formula(alpha_cond), tps_off, tps_on,
              median(ratios), *std::min_element(ratios.begin(), ratios.end()),
              *std::max_element(ratios.begin(), ratios.end()), compared - mismatches, compared, per_pos.c_str());
  g_rows.push_back({name, proposer, batch, o.k, k_mean, alpha, alpha_cond, tps_step, tps_off, tps_on, ratios,
                    mismatches, compared});
  std::fflush(stdout);
  // The parts of a speculative step, from the "on" engine's cost model (EMAs at the end): decode
  // step time by tokens in the step (t(n), proposer excluded) relative to t(1), one proposer
  // forward and the draft's catch-up per token relative to t(1), and the proposer's share of the
  // measured decode time (catch-up included).
  const MetricsSnapshot m = (*on)->metrics();
  const double t1 = m.spec_step_seconds.size() > 1 ? m.spec_step_seconds[1] : 0.0;
  std::string steps;
  for (size_t n = 2; n < m.spec_step_seconds.size(); ++n) {
    char cell[32];
    std::snprintf(cell, sizeof cell, "%s%.2f", n > 2 ? " " : "", t1 > 0 && m.spec_step_seconds[n] > 0 ? m.spec_step_seconds[n] / t1 : 0.0);
    steps += cell;
  }
  char line[512];
  std::snprintf(line, sizeof line, "| %-28s | %5zu | %2d | %6.2f | %s | %5.2f | %5.3f | %4.1f%% | %6lld | %6lld |\n", name, batch, o.k,
                t1 * 1e3, steps.c_str(), t1 > 0 ? m.spec_proposer_forward_seconds / t1 : 0.0,
                t1 > 0 ? m.spec_catch_up_seconds_per_token / t1 : 0.0,
                seconds_on > 0 ? 100.0 * total.spec_propose_seconds / seconds_on : 0.0,
                static_cast<long long>(total.spec_catch_up_tokens),
                static_cast<long long>(total.spec_draft_prefix_hit_tokens));
  g_parts += line;
}

void run_all(const Options& o);

std::string json_string(const std::string& v) {  // names and paths: no control characters
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool write_json(const std::string& path, const Options& o, const std::string& load_start, const std::string& load_end) {
  std::ofstream f(path);
  if (!f) return false;
  f << "{\"bench\": \"B9\", \"model\": " << json_string(o.model) << ", \"draft_target\": " << json_string(o.draft_target)
    << ", \"draft\": " << json_string(o.draft) << ", \"threads\": " << o.threads << ", \"rounds\": " << o.rounds
    << ", \"max_tokens\": " << o.max_tokens << ", \"load_start\": " << json_string(load_start)
    << ", \"load_end\": " << json_string(load_end) << ", \"rows\": [";
  for (size_t i = 0; i < g_rows.size(); ++i) {
    const Row& r = g_rows[i];
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s\n  {\"workload\": %s, \"proposer\": \"%s\", \"batch\": %zu, \"k\": %d, \"k_mean\": %.4f, "
                  "\"alpha\": %.4f, \"alpha_pos\": %.4f, \"tokens_per_step\": %.4f, \"off_tok_s\": %.3f, "
                  "\"on_tok_s\": %.3f, \"ratio_median\": %.4f, \"ratio_min\": %.4f, \"ratio_max\": %.4f, "
                  "\"same_output\": %d, \"requests\": %d, \"ratios\": [",
                  i ? "," : "", json_string(r.name).c_str(), r.proposer.c_str(), r.batch, r.k, r.k_mean, r.alpha,
                  r.alpha_pos, r.tokens_per_step, r.tps_off, r.tps_on, median(r.ratios),
                  *std::min_element(r.ratios.begin(), r.ratios.end()), *std::max_element(r.ratios.begin(), r.ratios.end()),
                  r.requests - r.mismatches, r.requests);
    f << buf;
    for (size_t j = 0; j < r.ratios.size(); ++j) f << (j ? ", " : "") << r.ratios[j];
    f << "]}";
  }
  f << "\n]}\n";
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model") o.model = v;
    else if (a == "--draft-target") o.draft_target = v;
    else if (a == "--draft") o.draft = v;
    else if (a == "--threads") o.threads = std::stoi(v);
    else if (a == "--rounds") o.rounds = std::stoi(v);
    else if (a == "--max-tokens") o.max_tokens = std::stoi(v);
    else if (a == "--k") o.k = std::stoi(v);
    else if (a == "--ks") {
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) o.ks.push_back(std::stoi(item));
    }
    else if (a == "--only") o.only = v;
    else if (a == "--batch") o.batch = std::stoi(v);
    else if (a == "--prompts") o.prompts = v;
    else if (a == "--json-out") o.json_out = v;
    else { std::fprintf(stderr, "unknown flag %s\n", a.c_str()); return 2; }
  }
  if (o.ks.empty()) o.ks.push_back(o.k);
  const std::string load_start = load_average();
  std::printf("B9 speculative: k in {");
  for (int32_t k : o.ks) std::printf(" %d", k);
  std::printf(" }, %d threads, %d rounds, %d tokens per request, greedy; load average %s\n", o.threads, o.rounds,
              o.max_tokens, load_start.c_str());
  std::printf("| workload | batch | k̄ | α | α_pos | tok/step | formula(α) | formula(α_pos) | off tok/s | on tok/s | ratio | min-max | same output | accepted per position |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int32_t k : o.ks) {
    o.k = k;
    std::printf("| **k = %d** | | | | | | | | | | | | | |\n", k);
    run_all(o);
  }
  std::printf("\nParts of a step (the on engine's cost model at the end of the workload; t(n) = decode step of n\n"
              "tokens without the proposer, t_d = one proposer forward, t_c = draft catch-up per token):\n");
  std::printf("| workload | batch | k | t(1) ms | t(2..k+1) / t(1) | t_d / t(1) | t_c / t(1) | proposer share | catch-up tokens | draft prefix hits |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n%s", g_parts.c_str());
  const std::string load_end = load_average();
  std::printf("load average at the end: %s\n", load_end.c_str());
  // The summary another script embeds: workload x batch x proposer, on/off median (min-max).
  std::printf("\n| workload | batch | proposer | k | on/off tok/s median (min-max) | same greedy output |\n|---|---|---|---|---|---|\n");
  int32_t mismatches = 0;
  for (const Row& r : g_rows) {
    std::printf("| %s | %zu | %s | %d | %.2fx (%.2f-%.2f) | %d/%d |\n", r.name.c_str(), r.batch, r.proposer.c_str(), r.k,
                median(r.ratios), *std::min_element(r.ratios.begin(), r.ratios.end()),
                *std::max_element(r.ratios.begin(), r.ratios.end()), r.requests - r.mismatches, r.requests);
    mismatches += r.mismatches;
  }
  if (!o.json_out.empty() && !write_json(o.json_out, o, load_start, load_end)) {
    std::fprintf(stderr, "cannot write %s\n", o.json_out.c_str());
    return 1;
  }
  if (mismatches > 0) {
    std::fprintf(stderr, "LOSSLESS CHECK FAILED: %d greedy outputs differ between speculation on and off\n", mismatches);
    return 3;
  }
  return 0;
}

namespace {
void run_all(const Options& o) {
  const std::vector<std::string> grounded(std::begin(kGrounded), std::end(kGrounded));
  const std::vector<std::string> open(std::begin(kOpen), std::end(kOpen));
  if (o.only.empty() || o.only == "ngram") {
    workload("ngram grounded", "ngram", o.model, "ngram", "", {grounded.begin(), grounded.begin() + 4}, 1, o);
    workload("ngram grounded", "ngram", o.model, "ngram", "", grounded, 8, o);
    workload("ngram open", "ngram", o.model, "ngram", "", {open.begin(), open.begin() + 4}, 1, o);
    workload("ngram open", "ngram", o.model, "ngram", "", open, 8, o);
  }
  if ((o.only.empty() || o.only == "draft") && !o.draft.empty()) {
    const std::string target = o.draft_target.empty() ? o.model : o.draft_target;
    workload("draft grounded", "draft", target, "draft", o.draft, {grounded.begin(), grounded.begin() + 4}, 1, o);
    workload("draft grounded", "draft", target, "draft", o.draft, grounded, 8, o);
    workload("draft open", "draft", target, "draft", o.draft, {open.begin(), open.begin() + 4}, 1, o);
    workload("draft open", "draft", target, "draft", o.draft, open, 8, o);
  }
}
}  // namespace

// The load generator: seeded workload, arrivals, statistics, and one run against the FakeEngine
// server (every request completes, token counts come from usage).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cli/load_gen.h"
#include "server_fixture.h"

namespace tessera::cli {
namespace {

TEST(LoadGen, DatasetIsSeededWithLengthsAndSharedPrefixes) {
  LoadConfig c;
  c.num_prompts = 6;
  c.input_len = 10;
  c.input_len_range = 0.5;
  c.prefix_len = 4;
  c.num_prefix_groups = 2;
  c.seed = 3;
  const auto a = make_dataset(c), b = make_dataset(c);
  ASSERT_EQ(a.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].text, b[i].text);
    EXPECT_GE(a[i].num_words, 4 + 5);
    EXPECT_LE(a[i].num_words, 4 + 15);
    size_t words = 1;
    for (char ch : a[i].text) words += ch == ' ' ? 1 : 0;
    EXPECT_EQ(static_cast<int32_t>(words), a[i].num_words);
  }
  auto prefix = [](const std::string& s) {
    size_t pos = 0;
    for (int k = 0; k < 4; ++k) pos = s.find(' ', pos + 1);
    return s.substr(0, pos);
  };
  EXPECT_EQ(prefix(a[0].text), prefix(a[2].text));
  EXPECT_EQ(prefix(a[1].text), prefix(a[5].text));
  EXPECT_NE(prefix(a[0].text), prefix(a[1].text));
  c.seed = 4;
  EXPECT_NE(make_dataset(c)[0].text, a[0].text);
}

// Each rate of a sweep gets its own prompts (a prefix cache must not serve rate 2 from rate 1's
// requests); the first rate keeps the plain seed, so a one-rate run is unchanged.
TEST(LoadGen, EverySweepRateDrawsItsOwnPrompts) {
  LoadConfig c;
  c.num_prompts = 3;
  c.input_len = 12;
  c.seed = 7;
  EXPECT_EQ(sweep_seed(7, 0), 7u);
  const auto first = make_dataset(c);
  std::vector<std::string> seen;
  for (size_t i = 0; i < 5; ++i) {
    LoadConfig run = c;
    run.seed = sweep_seed(c.seed, i);
    const auto prompts = make_dataset(run);
    if (i == 0) {
      EXPECT_EQ(prompts[0].text, first[0].text);
    }
    for (const BenchPrompt& p : prompts) {
      EXPECT_EQ(std::count(seen.begin(), seen.end(), p.text), 0) << "rate " << i << " replays a prompt";
      seen.push_back(p.text);
    }
  }
}

TEST(LoadGen, ArrivalsHaveTheRequestedRate) {
  const auto inf = arrival_offsets(5, INFINITY, 1.0, 1);
  EXPECT_EQ(inf, std::vector<double>(5, 0.0));
  const auto poisson = arrival_offsets(20001, 50.0, 1.0, 7);
  EXPECT_EQ(poisson[0], 0.0);
  EXPECT_TRUE(std::is_sorted(poisson.begin(), poisson.end()));
  EXPECT_NEAR(poisson.back() / 20000.0, 1.0 / 50.0, 0.001);  // mean gap = 1 / rate
  const auto bursty = arrival_offsets(20001, 50.0, 0.25, 7);
  EXPECT_NEAR(bursty.back() / 20000.0, 1.0 / 50.0, 0.002);
  EXPECT_EQ(arrival_offsets(10, 5.0, 1.0, 9), arrival_offsets(10, 5.0, 1.0, 9));
}

TEST(LoadGen, PercentilesTpotAndGoodput) {
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 90), 4.6);
  EXPECT_DOUBLE_EQ(percentile({}, 99), 0.0);
  RequestRecord r;
  r.ok = true;
  r.ttft_ms = 100;
  r.e2e_ms = 1000;
  r.output_tokens = 10;
  r.prompt_tokens = 5;
  r.itl_ms = {100, 100};
  EXPECT_DOUBLE_EQ(tpot_ms(r), 100.0);  // (1000 - 100) / (10 - 1)
  RequestRecord slow = r;
  slow.ttft_ms = 3000;
  slow.e2e_ms = 3900;
  RequestRecord failed;
  failed.error = "HTTP 500";
  LoadConfig c;
  c.request_rate = 2.0;
  c.slo_ms = {{"ttft", 2000}, {"tpot", 150}};
  const nlohmann::json s = summarize({r, slow, failed}, 2.0, c);
  EXPECT_EQ(s["completed"], 2);
  EXPECT_EQ(s["failed"], 1);
  EXPECT_EQ(s["errors"]["HTTP 500"], 1);
  EXPECT_DOUBLE_EQ(s["request_throughput"], 1.0);
  EXPECT_DOUBLE_EQ(s["output_throughput"], 10.0);
  EXPECT_DOUBLE_EQ(s["total_token_throughput"], 15.0);
  EXPECT_DOUBLE_EQ(s["ttft_ms"]["mean"], 1550.0);
  EXPECT_DOUBLE_EQ(s["tpot_ms"]["median"], 100.0);
  EXPECT_EQ(s["goodput_requests"], 1);
  EXPECT_DOUBLE_EQ(s["goodput"], 0.5);
}

TEST(LoadGen, RunsAgainstTheServerWithAConcurrencyCap) {
  testing::ServerFixture f;
  LoadConfig c;
  c.base_url = "http://127.0.0.1:" + std::to_string(f.port());
  c.num_prompts = 12;
  c.input_len = 8;
  c.output_len = 5;
  c.max_concurrency = 4;
  c.request_rate = 200.0;
  double duration = 0.0;
  const auto records = run_load(c, make_dataset(c), &duration);
  ASSERT_EQ(records.size(), 12u);
  for (const RequestRecord& r : records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.output_tokens, 5);
    EXPECT_GT(r.prompt_tokens, 8);
    EXPECT_EQ(r.itl_ms.size(), 4u);
    EXPECT_GT(r.e2e_ms, r.ttft_ms);
  }
  EXPECT_GT(duration, 0.0);
  const nlohmann::json s = summarize(records, duration, c);
  EXPECT_EQ(s["total_output_tokens"], 60);
  c.endpoint = "/v1/chat/completions";
  c.num_prompts = 3;
  const auto chat = run_load(c, make_dataset(c), &duration);
  for (const RequestRecord& r : chat) EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(discover_model(c), "fake-model");
}

TEST(LoadGen, ExtraBodyIsMergedLastIntoEveryRequest) {
  testing::ServerFixture f;
  LoadConfig c;
  c.base_url = "http://127.0.0.1:" + std::to_string(f.port());
  c.num_prompts = 3;
  c.input_len = 8;
  c.output_len = 5;  // sent as max_tokens = min_tokens = 5, overridden below
  c.extra_body = {{"max_tokens", 3}, {"min_tokens", 3}};
  double duration = 0.0;
  for (const RequestRecord& r : run_load(c, make_dataset(c), &duration)) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.output_tokens, 3);
    EXPECT_EQ(r.itl_ms.size(), 2u);
  }
  c.extra_body = {{"top_k", -5}};  // the server refuses it: every request fails with its status
  const auto bad = run_load(c, make_dataset(c), &duration);
  for (const RequestRecord& r : bad) EXPECT_EQ(r.error, "HTTP 400");
  EXPECT_EQ(summarize(bad, duration, c)["errors"]["HTTP 400"], 3);
}

// Multi-tenant: sessions in order, each turn the conversation so far, system prompts shared by
// session s % num_system_prompts.
TEST(LoadGen, MultiTenantSessionsShareSystemPromptsAndGrowTurnByTurn) {
  LoadConfig c;
  c.workload = "multi-tenant";
  c.num_sessions = 3;
  c.num_turns = 2;
  c.num_system_prompts = 2;
  c.system_prompt_len = 5;
  c.input_len = 3;
  c.output_len = 2;
  c.seed = 9;
  const auto a = make_dataset(c);
  ASSERT_EQ(a.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].session, static_cast<int32_t>(i / 2));
    EXPECT_EQ(a[i].turn, static_cast<int32_t>(i % 2));
    EXPECT_EQ(a[i].max_tokens, 2);
  }
  EXPECT_EQ(a[0].messages.size(), 2u);  // system, user
  EXPECT_EQ(a[1].messages.size(), 4u);  // system, user, assistant, user
  EXPECT_EQ(a[0].num_words, 5 + 3);
  EXPECT_EQ(a[1].num_words, 5 + 3 + 2 + 3);
  for (size_t m = 0; m < 2; ++m) EXPECT_EQ(a[1].messages[m], a[0].messages[m]);  // the turn extends the last
  EXPECT_EQ(a[1].messages[2]["role"], "assistant");
  EXPECT_EQ(a[0].messages[0]["role"], "system");
  EXPECT_EQ(a[0].messages[0], a[4].messages[0]);  // sessions 0 and 2: system prompt 0
  EXPECT_NE(a[0].messages[0], a[2].messages[0]);
  EXPECT_NE(a[0].messages[1], a[4].messages[1]);  // their own user turns
  const auto b = make_dataset(c);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].messages, b[i].messages);
}

TEST(LoadGen, MultiTenantRunSendsEverySessionsTurns) {
  testing::ServerFixture f;
  LoadConfig c;
  c.base_url = "http://127.0.0.1:" + std::to_string(f.port());
  c.workload = "multi-tenant";
  c.endpoint = "/v1/chat/completions";
  c.num_sessions = 4;
  c.num_turns = 3;
  c.system_prompt_len = 4;  // the FakeEngine's tokens are bytes, its context 256
  c.input_len = 2;
  c.output_len = 3;
  c.max_concurrency = 2;
  double duration = 0.0;
  const auto records = run_load(c, make_dataset(c), &duration);
  ASSERT_EQ(records.size(), 12u);
  for (const RequestRecord& r : records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.output_tokens, 3);
  }
  for (size_t i = 0; i + 1 < records.size(); ++i) {
    if (i % 3 != 2) {
      EXPECT_GT(records[i + 1].prompt_tokens, records[i].prompt_tokens);  // a turn grows
    }
  }
}

}  // namespace
}  // namespace tessera::cli

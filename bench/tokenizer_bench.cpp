// Encode/decode throughput of the tokenizers (single thread). The side-by-side comparison with
// `tokenizers` and `tiktoken` is tools/tokenizer_golden/bench.py; this one needs no Python.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <benchmark/benchmark.h>

#include "tokenizer/tokenizer.h"

namespace {

std::string shared_data() {
  if (const char* e = std::getenv("DLLMQ_SHARED_DATA")) return e;
  return DLLMQ_SOURCE_DIR "/../shared/data";
}

// Mixed text: GSM8K questions and answers when available, else a built-in paragraph.
const std::string& corpus() {
  static const std::string text = [] {
    std::ifstream f(shared_data() + "/gsm8k/test.jsonl");
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    if (s.empty())
      for (int i = 0; i < 2000; ++i)
        s += "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
             "clips in May. "
             "How many clips did Natalia sell altogether? 中文测试 😀 def f(x): return x**2\n";
    return s;
  }();
  return text;
}

void run_encode(benchmark::State& state, const dllmq::Tokenizer& tok) {
  const std::string& text = corpus();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok.encode(text);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n);
}

void BM_EncodeSynthTiny(benchmark::State& state) {
  static auto tok = dllmq::load_tokenizer_json(DLLMQ_SOURCE_DIR
                                               "/tests/data/tokenizer/synth_tiny.tokenizer.json");
  run_encode(state, *tok);
}
BENCHMARK(BM_EncodeSynthTiny)->Unit(benchmark::kMillisecond);

void BM_EncodeQwenTiktoken(benchmark::State& state) {
  const std::string path = shared_data() + "/tokenizers/qwen/qwen.tiktoken";
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("Qwen rank file not found: " + path).c_str());
    return;
  }
  static auto tok = dllmq::load_tiktoken(path, dllmq::qwen_special_tokens());
  run_encode(state, *tok);
}
BENCHMARK(BM_EncodeQwenTiktoken)->Unit(benchmark::kMillisecond);

void BM_DecodeSynthTiny(benchmark::State& state) {
  static auto tok = dllmq::load_tokenizer_json(DLLMQ_SOURCE_DIR
                                               "/tests/data/tokenizer/synth_tiny.tokenizer.json");
  const auto ids = tok->encode(corpus());
  for (auto _ : state) {
    auto s = tok->decode(ids);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus().size()));
}
BENCHMARK(BM_DecodeSynthTiny)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

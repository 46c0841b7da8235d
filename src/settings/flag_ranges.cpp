#include "settings/flag_ranges.h"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace dllmq::settings {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr long long kMaxLen = 1 << 24;  // lengths: the cap generation_config.json has too

struct Range {
  bool integer;
  double lo, hi;  // hi = kInf: any finite value above lo
  bool lo_open = false, hi_open = false;
  // > 0: values in (lo, min_positive) are refused too ("0, or in [min_positive, hi]"): a
  // temperature divides the logits, and one of 1e-310 overflows where 0 means greedy.
  double min_positive = 0;
};

// One entry per flag name; a name means the same thing in every subcommand that has it.
const std::vector<std::pair<const char*, Range>>& table() {
  static const std::vector<std::pair<const char*, Range>> t = {
      // decoding (generate, eval, bench, calibrate: cli/generate_flags.cpp)
      {"--gen-length", {true, 1, kMaxLen}},
      {"--block-length", {true, 1, kMaxLen}},
      {"--steps", {true, 1, kMaxLen}},
      {"--threshold", {false, 0, 1, true}},
      {"--factor", {false, 0, 1e6, true}},
      // Ranges hold in the arithmetic that uses them (decode/options.cpp has the same bounds and
      // says why): a temperature or an alg-temp divides logits / confidences in double, a
      // cfg-scale multiplies float logits.
      {"--temperature", {false, 0, 1e6, false, false, 1e-6}},
      {"--top-p", {false, 0, 1, true}},
      {"--top-k", {true, 0, std::numeric_limits<int>::max()}},
      {"--alg-temp", {false, 0, 1e6, false, false, 1e-6}},
      {"--eps", {false, 1e-12, 1, false, true}},  // Dream's timesteps run from 1 down to eps
      {"--cfg-scale", {false, 0, 1000}},
      {"--seed", {true, 0, 18446744073709551615.0}},
      {"--kv-bits", {true, 2, 8}},  // 2, 3, 4 or 8: the set itself is checked by --kv's spec
      {"--kv-bits-k", {true, 2, 8}},
      {"--kv-bits-v", {true, 2, 8}},
      {"--kv-group", {true, 1, 4096}},
      {"--threads", {true, 0, 4096}},
      // bench
      {"--prompt-length", {true, 1, kMaxLen}},
      {"--repeat", {true, 1, 1000}},
      // calibrate
      {"--sensitivity-pairs", {true, 0, std::numeric_limits<int>::max()}},  // 0 = every pair
      {"--budget", {false, 0, 1}},
      {"--budget-floor", {false, 0, 1}},
      {"--budget-cap", {false, 1, kInf}},
      {"--outlier-percent", {false, 0, 50, false, true}},
      {"--sink", {true, 0, 1 << 20}},
      {"--reservoir-rows", {true, 1, 1 << 24}},
      {"--limit", {true, 0, 1e15}},
      // eval
      {"--workers", {true, 1, 256}},
      {"--timeout", {false, 0, 86400, true}},
      {"--math-phase-timeout", {false, 0, 86400, true}},
      {"--mem-mb", {true, 16, 1 << 24}},
      {"--fake-delay-ms", {true, 0, 3600000}},
      // serve
      {"--port", {true, 0, 65535}},
      {"--parallel", {true, 1, 64}},
      {"--queue", {true, 0, 4096}},          // one HTTP thread per queue place, made at start
      {"--max-canvas", {true, 0, kMaxLen}},  // 0: the model's positions
      {"--max-body", {true, 1024, 1 << 30}},
      {"--batch-wait", {false, 0, 100}},
      {"--drain-timeout", {false, 0, 86400}},
      {"--request-timeout", {false, 0, 604800}},  // 0: no limit; at most a week
      {"--max-tokens", {true, 0, kMaxLen}},       // 0: no cap beyond the canvas
      {"--io-timeout", {false, 0.01, 3600}},
      {"--body-timeout", {false, 0, 86400}},
      {"--max-connections", {true, 1, 65536}},
      // grid
      {"--bootstrap", {true, 100, 100000}},
      {"--bootstrap-seed", {true, 0, 18446744073709551615.0}},
      // quantize: -1 = one group per output channel, 0 = the format's default; otherwise a
      // positive multiple of 8 (checked with the scheme)
      {"--group", {true, -1, 1 << 20}},
  };
  return t;
}

std::string describe(const Range& r) {
  auto num = [&](double x) {
    if (x == kInf) return std::string("inf");
    return r.integer ? fmt::format("{}", static_cast<long long>(x)) : fmt::format("{:g}", x);
  };
  if (r.integer && r.hi == 18446744073709551615.0) return "[0, 2^64)";
  if (r.min_positive > 0)
    return fmt::format("0 or [{:g}, {}{}", r.min_positive, num(r.hi), r.hi_open ? ")" : "]");
  return fmt::format("{}{}, {}{}", r.lo_open ? "(" : "[", num(r.lo), num(r.hi),
                     r.hi_open || r.hi == kInf ? ")" : "]");
}

// "" when `s` is a number inside `r`, else the reason.
std::string check(const Range& r, const std::string& s) {
  const char* b = s.data();
  const char* e = b + s.size();
  if (b != e && *b == '+') ++b;
  bool ok = false;
  if (r.integer) {
    if (r.lo >= 0 && b != e && *b != '-') {
      unsigned long long v = 0;
      const auto [p, ec] = std::from_chars(b, e, v);
      ok = ec == std::errc() && p == e && double(v) >= r.lo && double(v) <= r.hi;
    } else {
      long long v = 0;
      const auto [p, ec] = std::from_chars(b, e, v);
      ok = ec == std::errc() && p == e && double(v) >= r.lo && double(v) <= r.hi;
    }
    if (!ok) return fmt::format("'{}' is not an integer in {}", s, describe(r));
    return "";
  }
  double v = 0;
  const auto [p, ec] = std::from_chars(b, e, v);
  ok = ec == std::errc() && p == e && std::isfinite(v) && (r.lo_open ? v > r.lo : v >= r.lo) &&
       (r.hi_open ? v < r.hi : v <= r.hi) && !(v > 0 && v < r.min_positive);
  if (!ok) return fmt::format("'{}' is not a finite number in {}", s, describe(r));
  return "";
}

const Range* find(const std::string& flag) {
  for (const auto& [name, r] : table())
    if (flag == name) return &r;
  return nullptr;
}

bool numeric_type(const std::string& type) {
  return type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0 || type.rfind("FLOAT", 0) == 0 ||
         type.rfind("NUMBER", 0) == 0;
}

void apply(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    // Flags without a value, positionals and short-only options are not ranged numbers.
    if (o->get_type_size() == 0 || o->get_lnames().empty()) continue;
    if (!numeric_type(o->get_type_name())) continue;
    const std::string flag = "--" + o->get_lnames().front();
    const Range* r = find(flag);
    if (!r) continue;  // tests/python/test_input_errors.py lists numeric flags without a range
    const Range range = *r;
    o->check(CLI::Validator([range](std::string& s) { return check(range, s); },
                            "in " + describe(range), "dllmq-range"));
  }
  for (CLI::App* sub : app.get_subcommands({})) apply(*sub);
}

}  // namespace

void apply_flag_ranges(CLI::App& app) {
  apply(app);
}

std::string flag_range_text(const std::string& flag) {
  const Range* r = find(flag);
  return r ? describe(*r) : "";
}

}  // namespace dllmq::settings

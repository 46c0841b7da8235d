#include "eval/gsm8k_answer.h"

#include <algorithm>

#include "eval/regex.h"
#include "eval/text.h"

namespace dllmq::eval {

namespace {

// lm-eval RegexFilter: findall, pick one match, first non-empty group of a tuple, strip.
std::string regex_filter(const Regex& re, std::string_view response, bool last) {
  // Only the chosen match is built (a long response has millions of numbers).
  const auto found = last ? re.find_last(response) : re.search(response);
  if (!found) return kGsm8kInvalid;
  const RegexMatch& m = *found;
  for (size_t g = 1; g < m.groups.size(); ++g)
    if (m.groups[g] && !m.groups[g]->empty()) return strip(*m.groups[g]);
  return kGsm8kInvalid;
}

}  // namespace

std::string gsm8k_strict_extract(std::string_view response) {
  static const Regex re(R"(#### (\-?[0-9\.\,]+))");
  return regex_filter(re, response, false);
}

std::string gsm8k_flexible_extract(std::string_view response) {
  static const Regex re(R"((-?[$0-9.,]{2,})|(-?[0-9]+))");
  return regex_filter(re, response, true);
}

std::string gsm8k_normalize(std::string_view s) {
  static const Regex comma(","), dollar(R"(\$)"), hashes(R"((?s).*#### )"), period(R"(\.$)");
  std::string out(s);
  for (const Regex* re : {&comma, &dollar, &hashes, &period}) out = re->sub(out, "");
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return c < 128 ? static_cast<char>(std::tolower(c)) : c; });
  return out;
}

std::string gsm8k_gold(std::string_view answer_field) {
  return gsm8k_normalize(answer_field);
}

bool gsm8k_match(std::string_view extracted, std::string_view answer_field) {
  return gsm8k_normalize(extracted) == gsm8k_gold(answer_field);
}

}  // namespace dllmq::eval

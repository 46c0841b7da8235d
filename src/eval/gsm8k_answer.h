// GSM8K answer extraction and scoring as lm-eval v0.4.8's gsm8k task does it (gsm8k.yaml): regex
// filters "strict-match" and "flexible-extract", then exact_match after regexes_to_ignore.
#pragma once

#include <string>
#include <string_view>

namespace dllmq::eval {

inline constexpr const char* kGsm8kInvalid = "[invalid]";

// First `#### <number>` in the response, or "[invalid]".
std::string gsm8k_strict_extract(std::string_view response);
// Last number-like token (`(-?[$0-9.,]{2,})|(-?[0-9]+)`), or "[invalid]".
std::string gsm8k_flexible_extract(std::string_view response);
// exact_match normalization: drop ",", "$", everything through "#### ", a final "."; lowercase.
std::string gsm8k_normalize(std::string_view s);
// Gold answer as the metric sees it: gsm8k_normalize(answer field).
std::string gsm8k_gold(std::string_view answer_field);
bool gsm8k_match(std::string_view extracted, std::string_view answer_field);

}  // namespace dllmq::eval

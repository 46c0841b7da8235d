// MATH answer handling from lm-eval v0.4.8: minerva_math (extraction of "Final Answer: The final
// answer is ...", normalize_final_answer from Minerva appendix D) and hendrycks_math's pure-string
// is_equiv (strip_string). The sympy equivalence minerva reports lives in tools/eval/math_equiv.py.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dllmq::eval {

inline constexpr const char* kMathInvalid = "[invalidanswer]";

// The last \boxed{...} (or "\boxed " up to "$", or \fbox{...}) including the command; nullopt if
// there is none or its braces do not close.
std::optional<std::string> last_boxed_only_string(std::string_view s);
// "\boxed{X}" -> "X", "\boxed X" -> "X"; nullopt where lm-eval's assertions would fail.
std::optional<std::string> remove_boxed(std::string_view s);
// minerva get_unnormalized_answer: text after "Final Answer: The final answer is", or
// "[invalidanswer]".
std::string minerva_unnormalized_answer(std::string_view response);
std::string normalize_final_answer(std::string_view answer);
// Gold: normalize_final_answer(remove_boxed(last_boxed_only_string(solution))); nullopt if no box.
std::optional<std::string> minerva_gold(std::string_view solution);
// Predicted answer for the minerva pipeline: normalize_final_answer(unnormalized).
std::string minerva_extract(std::string_view response);

// hendrycks_math strip_string; throws std::runtime_error where Python raises (is_equiv then falls
// back to raw equality).
std::string strip_string(std::string_view s);
// hendrycks_math is_equiv on two (optional) answers.
bool math_string_equiv(const std::optional<std::string>& a, const std::optional<std::string>& b);

}  // namespace dllmq::eval

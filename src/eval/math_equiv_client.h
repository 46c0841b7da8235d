// Client of tools/eval/math_equiv.py: lm-eval minerva_math's sympy is_equiv (parse_latex +
// simplify(a - b) == 0 under a 5 s alarm) on pairs of normalized answers.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dllmq::eval {

// Default helper location: $DLLMQ_MATH_EQUIV, else <source dir>/tools/eval/math_equiv.py.
std::string default_math_equiv_helper();

// nullopt when the helper or its dependencies (sympy, antlr4 4.11) are unavailable; the reason
// goes to `why`. Otherwise one bool per pair, computed by `workers` helper processes.
std::optional<std::vector<bool>> sympy_equiv(
    const std::vector<std::pair<std::string, std::string>>& pairs, const std::string& helper,
    const std::string& python, int workers, std::string* why);

}  // namespace dllmq::eval

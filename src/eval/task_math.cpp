// math (lm-eval v0.4.8 minerva_math): 4 fixed Minerva shots, "Problem:\n...\n\nSolution:", answers
// taken from "Final Answer: The final answer is ...", normalize_final_answer on both sides.
// exact_match and math_verify are lm-eval's (sympy is_equiv with its 5 s alarm; math_verify on the
// normalized gold and the whole response), computed by tools/eval/math_equiv.py helper processes;
// string_equiv is our own native score: hendrycks_math's strip_string equivalence of the same
// normalized answers.
#include <filesystem>

#include <fmt/format.h>

#include "eval/data.h"
#include "eval/math_answer.h"
#include "eval/math_equiv_client.h"
#include "eval/prompts.h"
#include "eval/task.h"
#include "util/error.h"

namespace dllmq::eval {

namespace {

struct Shot {
  const char* problem;
  const char* solution;
};

// lm_eval/tasks/minerva_math/utils.py list_fewshot_samples (v0.4.8), character for character.
const Shot kMathShots[] = {
    {R"(Find the domain of the expression  $\frac{\sqrt{x-2}}{\sqrt{5-x}}$.})",
     "The expressions inside each square root must be non-negative. Therefore, $x-2 \\ge 0$, so "
     "$x\\ge2$, and "
     "$5 - x \\ge 0$, so $x \\le 5$. Also, the denominator cannot be equal to zero, so $5-x>0$, "
     "which gives $x<5$. "
     "Therefore, the domain of the expression is $\\boxed{[2,5)}$.\nFinal Answer: The final answer "
     "is $[2,5)$. I "
     "hope it is correct."},
    {R"(If $\det \mathbf{A} = 2$ and $\det \mathbf{B} = 12,$ then find $\det (\mathbf{A} \mathbf{B}).$)",
     "We have that $\\det (\\mathbf{A} \\mathbf{B}) = (\\det \\mathbf{A})(\\det \\mathbf{B}) = "
     "(2)(12) = "
     "\\boxed{24}.$\nFinal Answer: The final answer is $24$. I hope it is correct."},
    {"Terrell usually lifts two 20-pound weights 12 times. If he uses two 15-pound weights "
     "instead, how many times "
     "must Terrell lift them in order to lift the same total weight?",
     "If Terrell lifts two 20-pound weights 12 times, he lifts a total of $2\\cdot 12\\cdot20=480$ "
     "pounds of weight.  "
     "If he lifts two 15-pound weights instead for $n$ times, he will lift a total of "
     "$2\\cdot15\\cdot n=30n$ pounds "
     "of weight.  Equating this to 480 pounds, we can solve for "
     "$n$:\n\\begin{align*}\n30n&=480\\\\\n\\Rightarrow\\qquad "
     "n&=480/30=\\boxed{16}\n\\end{align*}\nFinal Answer: The final answer is $16$. I hope it is "
     "correct."},
    {"If the system of equations\n\n\\begin{align*}\n6x-4y&=a,\\\\\n6y-9x &=b.\n\\end{align*}has a "
     "solution $(x, y)$ "
     "where $x$ and $y$ are both nonzero,\nfind $\\frac{a}{b},$ assuming $b$ is nonzero.",
     "If we multiply the first equation by $-\\frac{3}{2}$, we "
     "obtain\n\n$$6y-9x=-\\frac{3}{2}a.$$Since we also know "
     "that $6y-9x=b$, we "
     "have\n\n$$-\\frac{3}{2}a=b\\Rightarrow\\frac{a}{b}=\\boxed{-\\frac{2}{3}}.$$\nFinal Answer: "
     "The final answer is $-\\frac{2}{3}$. I hope it is correct."},
};

std::string resolve_path(const std::string& data, const std::string& subset) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(data)) return data;
  if (subset.empty()) return (fs::path(data) / "test.jsonl").string();
  if (subset == "math500") return (fs::path(data) / "math500" / "test.jsonl").string();
  fail("--subset {}: unknown MATH subset (use math500 or leave it out)", subset);
}

class MathTask : public Task {
 public:
  MathTask(const std::string& data, const TaskOptions& opt) : apply_stop_(opt.apply_stop) {
    if (!opt.subset.empty() && opt.subset != "math500")
      fail("--subset {}: unknown MATH subset (use math500 or leave it out)", opt.subset);
    path_ = resolve_path(data, opt.subset);
    const auto docs = read_jsonl(path_);
    for (size_t i = 0; i < docs.size(); ++i) {
      const auto& d = docs[i];
      if (!d.contains("problem") || !d.contains("solution"))
        fail("{}:{}: needs fields 'problem' and 'solution'", path_, i + 1);
      // Typed before they are read: a number there is the file's error, not a type_error.
      for (const char* k : {"problem", "solution", "type", "subject"})
        if (d.contains(k) && !d[k].is_string())
          fail("{}:{}: field '{}' must be a string", path_, i + 1, k);
      problems_.push_back(d["problem"].get<std::string>());
      const std::string sol = d["solution"].get<std::string>();
      solutions_.push_back(sol);
      const auto gold = minerva_gold(sol);
      if (!gold) fail("{}:{}: solution has no \\boxed{{...}} answer", path_, i + 1);
      golds_.push_back(*gold);
      subjects_.push_back(d.contains("type") ? d["type"].get<std::string>()
                                             : d.value("subject", std::string()));
    }
  }

  std::string name() const override { return "math"; }
  size_t size() const override { return problems_.size(); }
  std::string task_id(size_t i) const override { return std::to_string(i); }
  std::vector<std::string> stop_strings() const override { return {"Problem:"}; }
  std::vector<std::string> metric_names() const override {
    return {"exact_match", "math_verify", "string_equiv"};
  }

  std::string prompt(size_t i) const override { return minerva_math_prompt(problems_[i]); }

  std::vector<SampleScore> score(const std::vector<size_t>& index,
                                 const std::vector<std::string>& responses,
                                 const ScoreEnv& env) const override {
    notes_.clear();
    std::vector<SampleScore> out;
    std::vector<MathRequest> reqs;
    for (size_t k = 0; k < index.size(); ++k) {
      const size_t i = index[k];
      const std::string r =
          apply_stop_ ? apply_stop_strings(responses[k], stop_strings()) : responses[k];
      SampleScore s;
      s.task_id = task_id(i);
      s.gold = golds_[i];
      s.group = subjects_[i];
      s.extracted = minerva_extract(r);
      s.metrics["string_equiv"] = math_string_equiv(s.extracted, s.gold) ? 1.0 : 0.0;
      s.metrics["exact_match"] = std::nullopt;
      s.metrics["math_verify"] = std::nullopt;
      reqs.push_back({r, solutions_[i]});
      out.push_back(std::move(s));
    }
    std::string why = env.math_off;
    if (env.math && !out.empty() && env.math->ready(&why)) {
      const size_t total = index.size();
      const auto verdicts = env.math->judge(reqs, [&](size_t done) {
        if (env.on_progress) env.on_progress(done, total);
      });
      size_t missing = 0, differ = 0, errors = 0;
      std::string first_error;
      for (size_t k = 0; k < out.size(); ++k) {
        const MathVerdict& v = verdicts[k];
        SampleScore& s = out[k];
        if (v.exact_match) s.metrics["exact_match"] = *v.exact_match ? 1.0 : 0.0;
        if (v.math_verify) s.metrics["math_verify"] = *v.math_verify ? 1.0 : 0.0;
        if (!v.exact_match || !v.math_verify) ++missing;
        if (v.normalized && (v.pred != s.extracted || v.gold != s.gold)) {
          // What exact_match scored is Python's normalization; keep the native one visible.
          ++differ;
          s.detail = "native normalization: " + s.extracted + " | " + s.gold;
          s.extracted = v.pred;
          s.gold = v.gold;
        }
        if (!v.error.empty()) {
          ++errors;
          if (first_error.empty()) first_error = "task " + s.task_id + ": " + v.error;
          s.detail += (s.detail.empty() ? "" : "; ") + v.error;
        }
      }
      if (!env.math->pin_mismatch().empty()) {
        std::string m;
        for (const auto& x : env.math->pin_mismatch()) m += (m.empty() ? "" : ", ") + x;
        notes_.push_back(
            "MATH scorer package versions differ from tools/eval/requirements.txt "
            "(lm-eval 0.4.8's resolution): " +
            m);
      }
      if (errors)
        notes_.push_back(fmt::format(
            "MATH helper: {} sample(s) timed out or crashed it ({} restart(s)); the phase it was "
            "in scores 0, as lm-eval's timeout would; first: {}",
            errors, env.math->restarts(), first_error));
      if (missing)
        notes_.push_back(
            fmt::format("exact_match/math_verify not computed for {} sample(s)", missing));
      if (differ)
        notes_.push_back(fmt::format(
            "{} sample(s): the native answer normalization differs from lm-eval's (Python); "
            "exact_match used lm-eval's, string_equiv the native one (see details)",
            differ));
      return out;
    }
    if (!out.empty())
      notes_.push_back(
          "exact_match and math_verify (lm-eval's minerva_math metrics) not computed: " + why);
    if (env.on_progress) env.on_progress(index.size(), index.size());
    return out;
  }

 private:
  bool apply_stop_;
  std::string path_;
  std::vector<std::string> problems_, solutions_, golds_, subjects_;
};

}  // namespace

std::string minerva_math_prompt(const std::string& problem) {
  std::string out;
  for (const Shot& s : kMathShots)
    out += std::string("Problem:\n") + s.problem + "\n\nSolution:" + " " + s.solution + "\n\n";
  return out + "Problem:\n" + problem + "\n\nSolution:";
}

std::unique_ptr<Task> make_math_task(const std::string& data, const TaskOptions& opt) {
  return std::make_unique<MathTask>(data, opt);
}

}  // namespace dllmq::eval

#include "eval/math_answer.h"

#include <stdexcept>
#include <utility>

#include "eval/regex.h"
#include "eval/text.h"

namespace dllmq::eval {

std::optional<std::string> last_boxed_only_string(std::string_view s) {
  if (contains(s, "\\boxed ")) {
    const auto parts = split(s, "\\boxed ");
    return "\\boxed " + split(parts.back(), "$").front();
  }
  size_t idx = s.rfind("\\boxed");
  if (idx == std::string_view::npos) {
    idx = s.rfind("\\fbox");
    if (idx == std::string_view::npos) return std::nullopt;
  }
  int open = 0;
  for (size_t i = idx; i < s.size(); ++i) {
    if (s[i] == '{') ++open;
    if (s[i] == '}' && --open == 0) return std::string(s.substr(idx, i + 1 - idx));
  }
  return std::nullopt;
}

std::optional<std::string> remove_boxed(std::string_view s) {
  if (contains(s, "\\boxed ")) {
    if (!s.starts_with("\\boxed ")) return std::nullopt;
    return std::string(s.substr(7));
  }
  if (!s.starts_with("\\boxed{") || s.size() < 8 || s.back() != '}') return std::nullopt;
  return std::string(s.substr(7, s.size() - 8));
}

std::string minerva_unnormalized_answer(std::string_view response) {
  // The dots are unescaped in lm-eval, so they match any character but "\n".
  // One start per line (regex.h): a line holding the prefix n times without the suffix cost
  // O(n^2) when every prefix was tried (400 KB: 3 minutes).
  static const Regex re(R"(Final Answer: The final answer is(.*?). I hope it is correct.)",
                        "Final Answer: The final answer is");
  const std::string text = std::string(response) + "I hope it is correct.";
  const auto m = re.search(text);
  if (!m) return kMathInvalid;
  return strip(m->groups[1].value_or(""));
}

std::string normalize_final_answer(std::string_view answer) {
  static const std::pair<const char*, const char*> kSubstitutions[] = {
      {"an ", ""},          {"a ", ""},
      {".$", "$"},          {"\\$", ""},
      {"\\ ", ""},          {" ", ""},
      {"mbox", "text"},     {",\\text{and}", ","},
      {"\\text{and}", ","}, {"\\text{m}", "\\text{}"}};
  static const char* kRemoved[] = {"square",       "ways",
                                   "integers",     "dollars",
                                   "mph",          "inches",
                                   "ft",           "hours",
                                   "km",           "units",
                                   "\\ldots",      "sue",
                                   "points",       "feet",
                                   "minutes",      "digits",
                                   "cents",        "degrees",
                                   "cm",           "gm",
                                   "pounds",       "meters",
                                   "meals",        "edges",
                                   "students",     "childrentickets",
                                   "multiples",    "\\text{s}",
                                   "\\text{.}",    "\\text{\ns}",
                                   "\\text{}^2",   "\\text{}^3",
                                   "\\text{\n}",   "\\text{}",
                                   "\\mathrm{th}", "^\\circ",
                                   "^{\\circ}",    "\\;",
                                   ",\\!",         "{,}",
                                   "\"",           "\\dots"};
  // The dot-star patterns search one start per line (regex.h): linear on a long answer.
  static const Regex dollars(R"((.*?)(\$)(.*?)(\$)(.*))", ""),
      text(R"((\\text\{)(.*?)(\}))", "\\text{"), textbf(R"((\\textbf\{)(.*?)(\}))", "\\textbf{"),
      overline(R"((\\overline\{)(.*?)(\}))", "\\overline{"),
      boxed(R"((\\boxed\{)(.*)(\}))", "\\boxed{"), frac(R"((frac)([^{])(.))"),
      sqrt(R"((sqrt)([^{]))");

  std::string s = split(answer, "=").back();
  for (const auto& [from, to] : kSubstitutions) s = replace_all(s, from, to);
  for (const char* r : kRemoved) s = replace_all(s, r, "");
  s = dollars.sub(s, "$\\3$");
  s = text.sub(s, "\\2");
  s = textbf.sub(s, "\\2");
  s = overline.sub(s, "\\2");
  s = boxed.sub(s, "\\2");
  s = frac.sub(s, "frac{\\2}{\\3}");
  s = sqrt.sub(s, "sqrt{\\2}");
  s = replace_all(s, "$", "");
  if (is_digits(replace_all(s, ",", ""))) s = replace_all(s, ",", "");
  return s;
}

std::optional<std::string> minerva_gold(std::string_view solution) {
  const auto boxed = last_boxed_only_string(solution);
  if (!boxed) return std::nullopt;
  const auto inner = remove_boxed(*boxed);
  if (!inner) return std::nullopt;
  return normalize_final_answer(*inner);
}

std::string minerva_extract(std::string_view response) {
  return normalize_final_answer(minerva_unnormalized_answer(response));
}

namespace {

struct PyError : std::runtime_error {
  PyError() : std::runtime_error("python exception") {}
};

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string fix_fracs(const std::string& string) {
  const auto substrs = split(string, "\\frac");
  std::string out = substrs[0];
  for (size_t i = 1; i < substrs.size(); ++i) {
    const std::string& sub = substrs[i];
    out += "\\frac";
    if (sub.empty()) throw PyError();  // substr[0] -> IndexError
    if (sub[0] == '{') {
      out += sub;
      continue;
    }
    if (sub.size() < 2) return string;
    const char a = sub[0], b = sub[1];
    if (b != '{')
      out += std::string("{") + a + "}{" + b + "}" + sub.substr(2);
    else
      out += std::string("{") + a + "}" + b + sub.substr(2);
  }
  return out;
}

// Python int(str): optional sign, digits with single "_" between them; surrounding whitespace ok.
long long py_int(const std::string& raw) {
  const std::string s = strip(raw);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i >= s.size()) throw PyError();
  long long v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9') {
      if (v > (1LL << 58)) throw PyError();  // far beyond any answer; avoid overflow
      v = v * 10 + (s[i] - '0');
      prev_digit = true;
    } else if (s[i] == '_' && prev_digit && i + 1 < s.size()) {
      prev_digit = false;
    } else {
      throw PyError();  // ValueError is not caught by fix_a_slash_b
    }
  }
  if (!prev_digit) throw PyError();
  return neg ? -v : v;
}

std::string fix_a_slash_b(const std::string& string) {
  const auto parts = split(string, "/");
  if (parts.size() != 2) return string;
  const long long a = py_int(parts[0]), b = py_int(parts[1]);
  if (string != std::to_string(a) + "/" + std::to_string(b)) return string;
  return "\\frac{" + std::to_string(a) + "}{" + std::to_string(b) + "}";
}

std::string remove_right_units(const std::string& string) {
  if (!contains(string, "\\text{ ")) return string;
  const auto parts = split(string, "\\text{ ");
  if (parts.size() != 2) throw PyError();  // assert len(splits) == 2
  return parts[0];
}

std::string fix_sqrt(const std::string& string) {
  if (!contains(string, "\\sqrt")) return string;
  const auto parts = split(string, "\\sqrt");
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].empty()) throw PyError();
    if (parts[i][0] != '{')
      out += std::string("\\sqrt{") + parts[i][0] + "}" + parts[i].substr(1);
    else
      out += "\\sqrt" + parts[i];
  }
  return out;
}

}  // namespace

std::string strip_string(std::string_view in) {
  std::string s(in);
  s = replace_all(s, "\n", "");
  s = replace_all(s, "\\!", "");
  s = replace_all(s, "\\\\", "\\");
  s = replace_all(s, "tfrac", "frac");
  s = replace_all(s, "dfrac", "frac");
  s = replace_all(s, "\\left", "");
  s = replace_all(s, "\\right", "");
  s = replace_all(s, "^{\\circ}", "");
  s = replace_all(s, "^\\circ", "");
  s = replace_all(s, "\\$", "");
  s = remove_right_units(s);
  s = replace_all(s, "\\%", "");
  s = replace_all(s, " .", " 0.");
  s = replace_all(s, "{.", "{0.");
  if (s.empty()) return s;
  if (s[0] == '.') s = "0" + s;
  if (const auto eq = split(s, "="); eq.size() == 2 && code_points(eq[0]) <= 2) s = eq[1];
  s = fix_sqrt(s);
  s = replace_all(s, " ", "");
  s = fix_fracs(s);
  if (s == "0.5") s = "\\frac{1}{2}";
  s = fix_a_slash_b(s);
  return s;
}

bool math_string_equiv(const std::optional<std::string>& a, const std::optional<std::string>& b) {
  if (!a && !b) return true;
  if (!a || !b) return false;
  try {
    return strip_string(*a) == strip_string(*b);
  } catch (const PyError&) {
    return *a == *b;
  }
}

}  // namespace dllmq::eval

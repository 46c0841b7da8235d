// Python str methods the lm-eval answer pipelines are written in terms of.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dllmq::eval {

std::string replace_all(std::string s, std::string_view from, std::string_view to);  // str.replace
std::string strip(std::string_view s);                                               // str.strip()
std::vector<std::string> split(std::string_view s, std::string_view sep);  // str.split(sep)
bool contains(std::string_view s, std::string_view needle);
bool is_digits(std::string_view s);  // str.isdigit() for ASCII text: non-empty, all 0-9
int count(std::string_view s, std::string_view needle);

}  // namespace dllmq::eval

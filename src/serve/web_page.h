// The page served at / (src/serve/web/index.html, compiled into the binary by CMake so the
// server needs no files beside it).
#pragma once

#include <string>

namespace dllmq::serve {

const std::string& web_page_html();

}  // namespace dllmq::serve

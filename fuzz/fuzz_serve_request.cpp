// HTTP requests to `dllmq serve`'s completion routes, through cpp-httplib's request parsing and
// body framing (Content-Length, Transfer-Encoding: chunked, any content type), the server's own
// body limit (src/serve/request_body.cpp) and the request parser (src/serve/request.cpp) against
// both embedded models' config, tokenizer and chat template, as the server does before it
// queues a request.
// Input: a selector byte (bit 0: chat endpoint, bit 1: the Dream model, bit 2: server default
// --cache dual --threshold 0.9), a transport byte (bits 0-1: 0 Content-Length, 1 chunked in
// pieces of 1 + (bits 4-7) * 97 bytes, 2-3: the rest of the input is the whole HTTP request as
// sent; bits 2-3: Content-Type application/json, application/x-www-form-urlencoded, text/plain,
// multipart/form-data), then the body.
// A request is either accepted as one the decoder can run, or refused with a 400 (a field or the
// body), 413 (larger than --max-body, whatever the framing), 415 (multipart) ApiError; anything
// else escapes and is a finding. With well-formed framing the parser sees exactly the body sent.
#include <array>
#include <cstdlib>
#include <optional>

#include <httplib.h>

#include "decode/generate.h"
#include "fuzz_util.h"
#include "io/model_config.h"
#include "serve/api_error.h"
#include "serve/request.h"
#include "serve/request_body.h"
#include "settings/text_codec.h"

namespace {

// A small --max-body, so that the fuzzer reaches the limit with every framing (libFuzzer keeps
// inputs near the largest seed, ~600 bytes).
constexpr size_t kMaxBody = 256;

struct Served {
  std::string dir;
  dllmq::ModelConfig cfg;
  std::unique_ptr<dllmq::settings::TextCodec> codec;
};

const Served& served(bool dream) {
  static const std::array<Served, 2> s = [] {
    std::array<Served, 2> out;
    const char* dirs[2] = {"models/dllmq-synth-tiny", "models/dllmq-synth-dream-tiny"};
    for (int i = 0; i < 2; ++i) {
      out[i].dir = fuzz::repo_file(dirs[i]);
      out[i].cfg = dllmq::load_model_config(out[i].dir);
      out[i].codec = std::make_unique<dllmq::settings::TextCodec>(out[i].dir, out[i].cfg);
    }
    return out;
  }();
  return s[dream ? 1 : 0];
}

// The bytes of one HTTP exchange: the request to read, the response written.
class MemoryStream : public httplib::Stream {
 public:
  explicit MemoryStream(std::string in) : in_(std::move(in)) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* p, size_t n) override {
    n = std::min(n, in_.size() - pos_);
    std::copy_n(in_.data() + pos_, n, p);
    pos_ += n;
    return ssize_t(n);
  }
  ssize_t write(const char* p, size_t n) override {
    out_.append(p, n);
    return ssize_t(n);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1", port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1", port = 8080;
  }
  socket_t socket() const override { return 0; }

 private:
  std::string in_, out_;
  size_t pos_ = 0;
};

// What the route saw: the body it read (or the error it answered), and the parse's outcome.
struct Outcome {
  bool routed = false;
  std::optional<std::string> body;
  int status = 0;
};

// A server with the completion routes as `dllmq serve` has them (read the body under the limit,
// then parse it), fed one request from memory.
class FuzzServer : public httplib::Server {
 public:
  FuzzServer() {
    set_payload_max_length(kMaxBody);
    for (const char* path : {"/v1/completions", "/v1/chat/completions"})
      Post(path, [this](const httplib::Request& req, httplib::Response& res,
                        const httplib::ContentReader& reader) {
        out.routed = true;
        std::string body;
        if (auto err = dllmq::serve::read_request_body(req, reader, res, kMaxBody,
                                                       /*body_timeout_s=*/0, body)) {
          const int st = err->status();
          if (st != 400 && st != 413 && st != 415) std::abort();
          if (st == 413 && std::string(err->what()).find("--max-body") == std::string::npos)
            std::abort();  // the message names the limit that applied
          out.status = st;
          return;
        }
        if (body.size() > kMaxBody) std::abort();
        out.body = body;
        out.status = parse(body, req.path == "/v1/chat/completions");
      });
  }
  Outcome feed(std::string raw) {
    out = {};
    MemoryStream s(std::move(raw));
    bool closed = false;
    process_request(s, /*close_connection=*/true, closed, nullptr);
    return out;
  }
  uint8_t sel = 0;

 private:
  // The request parser's properties (as before this harness read HTTP): 200 = accepted.
  int parse(const std::string& body, bool chat) const {
    const Served& m = served(sel & 2);
    dllmq::serve::RequestDefaults defaults;
    defaults.model_dir = m.dir;
    defaults.max_positions = 256;  // a small --max-canvas: long prompts must be refused
    if (sel & 4) {
      defaults.flags.cache = "dual";
      defaults.flags.threshold = 0.9;
    }
    const auto endpoint =
        chat ? dllmq::serve::Endpoint::kChat : dllmq::serve::Endpoint::kCompletions;
    try {
      const auto r = dllmq::serve::parse_request(body, endpoint, defaults, *m.codec, m.cfg);
      if (r.prompts.empty() || (r.stream && r.prompts.size() != 1)) std::abort();
      if (r.options.steps < 1 || r.options.steps > r.options.gen_length) std::abort();
      for (const auto& p : r.prompts) {
        if (int(p.size()) + r.options.gen_length > defaults.max_positions) std::abort();
        for (const int32_t id : p)
          if (id < 0 || id >= m.cfg.vocab_size) std::abort();
        dllmq::check_generate_options(r.options, m.cfg, p);  // throws: a finding (escapes)
      }
      for (const auto& s : r.stop)
        if (s.empty()) std::abort();
      return 200;
    } catch (const dllmq::serve::ApiError& e) {
      if (e.status() != 400 || std::string(e.what()).empty()) std::abort();
      return 400;
    }
  }
  Outcome out;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static FuzzServer server;
  server.sel = data[0];
  const uint8_t transport = data[1];
  const std::string body(fuzz::as_text(data + 2, size - 2));
  const bool chat = data[0] & 1;
  const int framing = transport & 3;
  static const char* kTypes[4] = {"application/json", "application/x-www-form-urlencoded",
                                  "text/plain; charset=utf-8", "multipart/form-data; boundary=xyz"};
  const int type = (transport >> 2) & 3;
  std::string raw;
  if (framing >= 2) {
    raw = body;  // the fuzzer writes the request line, headers and framing itself
  } else {
    raw = std::string("POST ") + (chat ? "/v1/chat/completions" : "/v1/completions") +
          " HTTP/1.1\r\nHost: x\r\nContent-Type: " + kTypes[type] + "\r\n";
    if (framing == 0) {
      raw += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    } else {
      raw += "Transfer-Encoding: chunked\r\n\r\n";
      const size_t piece = 1 + size_t(transport >> 4) * 97;
      for (size_t at = 0; at < body.size(); at += piece) {
        const size_t n = std::min(piece, body.size() - at);
        char hex[32];
        std::snprintf(hex, sizeof hex, "%zx\r\n", n);
        raw += hex + body.substr(at, n) + "\r\n";
      }
      raw += "0\r\n\r\n";
    }
  }
  const Outcome o = server.feed(std::move(raw));
  if (framing < 2) {
    // Well-formed framing: the route runs, and sees exactly the body sent, or refuses it as too
    // large (only when it is), or as multipart.
    if (!o.routed) std::abort();
    if (type == 3) {
      if (o.status != 415 && o.status != 413 && o.status != 400) std::abort();
    } else if (body.size() > kMaxBody) {
      if (o.status != 413) std::abort();
    } else if (!o.body || *o.body != body) {
      std::abort();
    }
  }
  return 0;
}

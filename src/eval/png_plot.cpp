#include "eval/png_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "util/error.h"

namespace dllmq::eval {

Image::Image(int w, int h, Rgb fill) : width(w), height(h), rgb(size_t(w) * h * 3) {
  for (size_t i = 0; i < rgb.size(); i += 3)
    rgb[i] = fill.r, rgb[i + 1] = fill.g, rgb[i + 2] = fill.b;
}

Rgb Image::at(int x, int y) const {
  const size_t i = (size_t(y) * width + x) * 3;
  return {rgb[i], rgb[i + 1], rgb[i + 2]};
}

void Image::set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  const size_t i = (size_t(y) * width + x) * 3;
  rgb[i] = c.r, rgb[i + 1] = c.g, rgb[i + 2] = c.b;
}

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t adler32(const uint8_t* data, size_t n) {
  uint32_t a = 1, b = 0;
  for (size_t i = 0; i < n; ++i) {
    a = (a + data[i]) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

namespace {

void put_be32(std::string& s, uint32_t v) {
  for (int sh = 24; sh >= 0; sh -= 8) s.push_back(static_cast<char>((v >> sh) & 0xff));
}

void put_chunk(std::string& png, const char* type, const std::string& data) {
  put_be32(png, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  png += body;
  put_be32(png, crc32(reinterpret_cast<const uint8_t*>(body.data()), body.size()));
}

// zlib stream (RFC 1950) whose deflate data is stored blocks only (RFC 1951 BTYPE 00).
std::string zlib_stored(const std::string& raw) {
  std::string z = "\x78\x01";  // CM 8, 32K window; FCHECK makes 0x7801 a multiple of 31
  size_t pos = 0;
  do {
    const size_t len = std::min<size_t>(65535, raw.size() - pos);
    const bool last = pos + len == raw.size();
    z.push_back(last ? 1 : 0);  // BFINAL, BTYPE=00; the rest of the byte is padding
    z.push_back(static_cast<char>(len & 0xff));
    z.push_back(static_cast<char>(len >> 8));
    z.push_back(static_cast<char>(~len & 0xff));
    z.push_back(static_cast<char>((~len >> 8) & 0xff));
    z.append(raw, pos, len);
    pos += len;
  } while (pos < raw.size());
  put_be32(z, adler32(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()));
  return z;
}

}  // namespace

std::string encode_png(const Image& img) {
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put_be32(ihdr, img.width);
  put_be32(ihdr, img.height);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, filter 0, no interlace
  put_chunk(png, "IHDR", ihdr);
  std::string raw;
  raw.reserve(size_t(img.height) * (img.width * 3 + 1));
  for (int y = 0; y < img.height; ++y) {
    raw.push_back(0);  // filter type None
    raw.append(reinterpret_cast<const char*>(img.rgb.data()) + size_t(y) * img.width * 3,
               size_t(img.width) * 3);
  }
  put_chunk(png, "IDAT", zlib_stored(raw));
  put_chunk(png, "IEND", "");
  return png;
}

void write_png(const std::string& path, const Image& img) {
  std::ofstream f(path, std::ios::binary);
  const std::string png = encode_png(img);
  if (!f || !f.write(png.data(), static_cast<std::streamsize>(png.size())))
    fail("{}: cannot write PNG", path);
}

int PlotFrame::px(double x) const {
  return left + static_cast<int>(std::lround((x - x0) / (x1 - x0) * (right - left)));
}
int PlotFrame::py(double y) const {
  return bottom - static_cast<int>(std::lround((y - y0) / (y1 - y0) * (bottom - top)));
}

const PaletteEntry& plot_palette(int series) {
  static const PaletteEntry p[] = {
      {"blue", {31, 119, 180}, "square"},   {"orange", {255, 127, 14}, "circle"},
      {"green", {44, 160, 44}, "triangle"}, {"red", {214, 39, 40}, "diamond"},
      {"purple", {148, 103, 189}, "plus"},  {"brown", {140, 86, 75}, "cross"},
      {"pink", {227, 119, 194}, "square"},  {"grey", {127, 127, 127}, "circle"},
  };
  constexpr int n = sizeof(p) / sizeof(p[0]);
  return p[((series % n) + n) % n];
}

namespace {

constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0}, kGridLine{225, 225, 225};

// 5x7 bitmap glyphs (row bits, MSB = left column) for tick labels.
const uint8_t* glyph(char c) {
  static const uint8_t digits[10][7] = {{14, 17, 19, 21, 25, 17, 14}, {4, 12, 4, 4, 4, 4, 14},
                                        {14, 17, 1, 2, 4, 8, 31},     {31, 2, 4, 2, 1, 17, 14},
                                        {2, 6, 10, 18, 31, 2, 2},     {31, 16, 30, 1, 1, 17, 14},
                                        {6, 8, 16, 30, 17, 17, 14},   {31, 1, 2, 4, 8, 8, 8},
                                        {14, 17, 17, 14, 17, 17, 14}, {14, 17, 17, 15, 1, 2, 12}};
  static const uint8_t dot[7] = {0, 0, 0, 0, 0, 12, 12}, minus[7] = {0, 0, 0, 31, 0, 0, 0};
  if (c >= '0' && c <= '9') return digits[c - '0'];
  if (c == '.') return dot;
  if (c == '-') return minus;
  return nullptr;  // other characters are left blank
}

int text_width(const std::string& s) {
  return static_cast<int>(s.size()) * 6 - 1;
}

void draw_text(Image& img, int x, int y, const std::string& s, Rgb c) {  // (x, y) = top-left
  for (char ch : s) {
    if (const uint8_t* g = glyph(ch))
      for (int r = 0; r < 7; ++r)
        for (int col = 0; col < 5; ++col)
          if (g[r] & (16 >> col)) img.set(x + col, y + r, c);
    x += 6;
  }
}

bool inside(const std::string& shape, int dx, int dy, int r) {
  if (r < 0) return false;
  const int ax = std::abs(dx), ay = std::abs(dy);
  if (shape == "circle") return dx * dx + dy * dy <= r * r + r;
  if (shape == "triangle") return dy >= -r && dy <= r && 2 * ax <= dy + r;
  if (shape == "diamond") return ax + ay <= r;
  if (shape == "plus") return (ax <= 1 && ay <= r) || (ay <= 1 && ax <= r);
  if (shape == "cross") return std::abs(ax - ay) <= 1 && ax <= r;
  return ax <= r && ay <= r;  // square
}

void draw_marker(Image& img, int cx, int cy, const PaletteEntry& p, bool hollow) {
  constexpr int r = 5;
  const std::string shape = p.marker;
  const bool outline = hollow && shape != "plus" && shape != "cross";
  for (int dy = -r; dy <= r; ++dy)
    for (int dx = -r; dx <= r; ++dx)
      if (inside(shape, dx, dy, r) && !(outline && inside(shape, dx, dy, r - 2)))
        img.set(cx + dx, cy + dy, p.colour);
}

// 1, 2 or 5 times a power of ten, about span/target.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

std::string tick_text(double v, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  std::string s = fmt::format("{:.{}f}", v, decimals);
  return (s == "-0" || (s.starts_with("-0.") && std::stod(s) == 0)) ? s.substr(1) : s;
}

}  // namespace

Plot scatter_plot(const std::vector<PlotPoint>& points, int width, int height, double x_min_hint,
                  double x_max_hint) {
  double xl = x_min_hint, xh = x_max_hint, yl = 0, yh = 1;
  for (const auto& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    xl = std::min(xl, p.x), xh = std::max(xh, p.x), yl = std::min(yl, p.y), yh = std::max(yh, p.y);
  }
  if (xh <= xl) xh = xl + 1;
  if (yh <= yl) yh = yl + 1;
  const double xs = nice_step(xh - xl, 7), ys = nice_step(yh - yl, 5);
  Plot plot{Image(width, height, kWhite), {}};
  PlotFrame& f = plot.frame;
  // Half a step of margin so that markers at the ends of the range stay inside the box.
  f.x0 = xl - xs / 2, f.x1 = xh + xs / 2, f.y0 = yl - ys / 4, f.y1 = yh + ys / 4;
  f.left = 48, f.right = width - 16, f.top = 16, f.bottom = height - 32;
  Image& img = plot.image;
  for (double t = std::ceil(f.x0 / xs) * xs; t <= f.x1; t += xs) {
    const int x = f.px(t);
    for (int y = f.top; y < f.bottom; ++y) img.set(x, y, kGridLine);
    for (int y = f.bottom; y <= f.bottom + 4; ++y) img.set(x, y, kBlack);
    const std::string s = tick_text(t, xs);
    draw_text(img, x - text_width(s) / 2, f.bottom + 8, s, kBlack);
  }
  for (double t = std::ceil(f.y0 / ys) * ys; t <= f.y1; t += ys) {
    const int y = f.py(t);
    for (int x = f.left + 1; x <= f.right; ++x) img.set(x, y, kGridLine);
    for (int x = f.left - 4; x <= f.left; ++x) img.set(x, y, kBlack);
    const std::string s = tick_text(t, ys);
    draw_text(img, f.left - 8 - text_width(s), y - 3, s, kBlack);
  }
  for (int x = f.left; x <= f.right; ++x) img.set(x, f.bottom, kBlack), img.set(x, f.top, kBlack);
  for (int y = f.top; y <= f.bottom; ++y) img.set(f.left, y, kBlack), img.set(f.right, y, kBlack);
  // Points at the same pixel (e.g. equal accuracy at 16 bits) are spread sideways: 0, -7, +7, -14,
  // ...
  std::map<std::pair<int, int>, int> seen;
  for (const auto& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    const int cx = f.px(p.x), cy = f.py(p.y), k = seen[{cx, cy}]++;
    draw_marker(img, cx + (k % 2 ? -1 : 1) * 7 * ((k + 1) / 2), cy, plot_palette(p.series),
                p.hollow);
  }
  return plot;
}

}  // namespace dllmq::eval

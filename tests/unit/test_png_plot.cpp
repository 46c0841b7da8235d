// The PNG writer (checked by parsing its output independently: chunks, CRCs, stored deflate
// blocks, Adler-32) and the scatter-plot rasteriser used by `dllmq grid`.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "eval/png_plot.h"

namespace dllmq::eval {
namespace {

uint32_t be32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

// Bitwise CRC-32 (no table), independent of the encoder's table-driven one.
uint32_t slow_crc32(const std::string& s) {
  uint32_t c = 0xffffffffu;
  for (char ch : s) {
    c ^= static_cast<uint8_t>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

struct Chunk {
  std::string type, data;
};

std::vector<Chunk> parse_chunks(const std::string& png) {
  std::vector<Chunk> out;
  size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint32_t len = be32(png, at);
    Chunk c{png.substr(at + 4, 4), png.substr(at + 8, len)};
    EXPECT_EQ(be32(png, at + 8 + len), slow_crc32(c.type + c.data)) << "CRC of " << c.type;
    out.push_back(c);
    at += 12 + len;
  }
  EXPECT_EQ(at, png.size());
  return out;
}

// zlib stream of stored deflate blocks -> raw bytes (fails the test on anything else).
std::string inflate_stored(const std::string& z) {
  EXPECT_GE(z.size(), 2u + 5u + 4u);
  EXPECT_EQ((static_cast<uint8_t>(z[0]) << 8 | static_cast<uint8_t>(z[1])) % 31, 0);
  EXPECT_EQ(static_cast<uint8_t>(z[0]) & 0x0f, 8);  // deflate
  std::string raw;
  size_t at = 2;
  for (bool last = false; !last;) {
    const uint8_t hdr = static_cast<uint8_t>(z.at(at));
    last = hdr & 1;
    EXPECT_EQ((hdr >> 1) & 3, 0) << "not a stored block";
    const unsigned len = static_cast<uint8_t>(z.at(at + 1)) | static_cast<uint8_t>(z.at(at + 2))
                                                                  << 8;
    const unsigned nlen = static_cast<uint8_t>(z.at(at + 3)) | static_cast<uint8_t>(z.at(at + 4))
                                                                   << 8;
    EXPECT_EQ(len ^ 0xffffu, nlen);
    raw += z.substr(at + 5, len);
    at += 5 + len;
  }
  uint32_t a = 1, b = 0;
  for (char ch : raw) a = (a + static_cast<uint8_t>(ch)) % 65521, b = (b + a) % 65521;
  EXPECT_EQ(be32(z, at), (b << 16) | a) << "Adler-32";
  EXPECT_EQ(at + 4, z.size());
  return raw;
}

TEST(PngPlot, ChecksumsKnownValues) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t*>(s.data()), s.size()), 0xCBF43926u);
  const std::string w = "Wikipedia";
  EXPECT_EQ(adler32(reinterpret_cast<const uint8_t*>(w.data()), w.size()), 0x11E60398u);
}

void check_round_trip(int w, int h) {
  Image img(w, h, {10, 20, 30});
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) img.set(x, y, {uint8_t(x * 7), uint8_t(y * 13), uint8_t(x ^ y)});
  const std::string png = encode_png(img);
  ASSERT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const auto chunks = parse_chunks(png);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].type, "IHDR");
  ASSERT_EQ(chunks[0].data.size(), 13u);
  EXPECT_EQ(be32(chunks[0].data, 0), uint32_t(w));
  EXPECT_EQ(be32(chunks[0].data, 4), uint32_t(h));
  EXPECT_EQ(chunks[0].data.substr(8), std::string("\x08\x02\x00\x00\x00", 5));  // 8-bit RGB
  EXPECT_EQ(chunks[1].type, "IDAT");
  EXPECT_EQ(chunks[2].type, "IEND");
  EXPECT_TRUE(chunks[2].data.empty());
  std::string expect;  // filter byte 0, then the row's RGB bytes
  for (int y = 0; y < h; ++y) {
    expect.push_back(0);
    expect.append(reinterpret_cast<const char*>(img.rgb.data()) + size_t(y) * w * 3, size_t(w) * 3);
  }
  EXPECT_EQ(inflate_stored(chunks[1].data), expect);
}

TEST(PngPlot, SmallImageRoundTrips) {
  check_round_trip(5, 3);
}

TEST(PngPlot, SeveralStoredBlocks) {
  check_round_trip(200, 150);
}  // 90150 bytes > one 65535 block

TEST(PngPlot, PointsAreDrawnWhereTheyBelong) {
  const std::vector<PlotPoint> pts = {{16, 0.75, 0, false}, {4, 0.25, 1, false}, {8, 0.5, 2, true}};
  const Plot p = scatter_plot(pts, 320, 240);
  ASSERT_EQ(p.image.width, 320);
  ASSERT_EQ(p.image.height, 240);
  const Rgb white{255, 255, 255};
  EXPECT_EQ(p.image.at(p.frame.px(16), p.frame.py(0.75)), plot_palette(0).colour);  // filled square
  EXPECT_EQ(p.image.at(p.frame.px(4), p.frame.py(0.25)), plot_palette(1).colour);   // filled circle
  // Hollow marker: outline coloured, centre not.
  EXPECT_NE(p.image.at(p.frame.px(8), p.frame.py(0.5)), plot_palette(2).colour);
  bool ring = false;
  for (int d = -5; d <= 5; ++d)
    ring |= p.image.at(p.frame.px(8) + d, p.frame.py(0.5) + 4) == plot_palette(2).colour;
  EXPECT_TRUE(ring);
  // Points inside the box, away from the edges; a spot with no point stays background.
  EXPECT_GT(p.frame.px(16), p.frame.left);
  EXPECT_LT(p.frame.px(16), p.frame.right);
  EXPECT_EQ(p.image.at(p.frame.px(12) + 3, p.frame.py(0.1) + 3), white);
  // Axes are drawn.
  EXPECT_EQ(p.image.at(p.frame.left, (p.frame.top + p.frame.bottom) / 2), (Rgb{0, 0, 0}));
  EXPECT_EQ(p.image.at((p.frame.left + p.frame.right) / 2, p.frame.bottom), (Rgb{0, 0, 0}));
}

TEST(PngPlot, CoincidentPointsAreSpreadApart) {
  const Plot p = scatter_plot({{16, 0.0, 0, false}, {16, 0.0, 1, false}}, 320, 240);
  const int x = p.frame.px(16), y = p.frame.py(0.0);
  EXPECT_EQ(p.image.at(x, y), plot_palette(0).colour);
  EXPECT_EQ(p.image.at(x - 7, y), plot_palette(1).colour);
}

TEST(PngPlot, EmptyPlotStillHasAxes) {
  const Plot p = scatter_plot({}, 100, 80);
  EXPECT_EQ(encode_png(p.image).substr(1, 3), "PNG");
  EXPECT_EQ(p.image.at(p.frame.left, p.frame.bottom), (Rgb{0, 0, 0}));
}

}  // namespace
}  // namespace dllmq::eval

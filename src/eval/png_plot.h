// A tiny self-contained PNG writer (8-bit RGB, zlib stream of stored deflate blocks, no
// dependencies) and a scatter-plot rasteriser for `dllmq grid` (accuracy against effective
// KV bits). Stored blocks make the files larger than zlib would, which is fine for small plots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dllmq::eval {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel

  Image(int w, int h, Rgb fill);
  Rgb at(int x, int y) const;
  void set(int x, int y, Rgb c);  // clipped: pixels outside the image are ignored
};

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);  // PNG/zlib CRC-32
uint32_t adler32(const uint8_t* data, size_t n);

// The PNG file bytes: signature, IHDR (colour type 2, no interlace), one IDAT, IEND.
// Every scanline uses filter type 0.
std::string encode_png(const Image& img);
void write_png(const std::string& path, const Image& img);  // throws naming the path

struct PlotPoint {
  double x = 0, y = 0;
  int series = 0;       // index into plot_palette(): one colour + marker shape per setting
  bool hollow = false;  // drawn as an outline (e.g. x assumed, not measured)
};

// Data <-> pixel mapping of a plot's axes box.
struct PlotFrame {
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;         // data range
  int left = 0, right = 0, top = 0, bottom = 0;  // pixel box
  int px(double x) const;
  int py(double y) const;
};

struct Plot {
  Image image;
  PlotFrame frame;
};

struct PaletteEntry {
  const char* name;
  Rgb colour;
  const char* marker;  // "square", "circle", ...
};
// Colours/markers by series index (cycles past the end).
const PaletteEntry& plot_palette(int series);

// Scatter plot on a white background: axes, ticks with digit labels, one marker per point.
// The x range always includes [x_min_hint, x_max_hint]; y defaults to [0, 1] and grows to fit.
Plot scatter_plot(const std::vector<PlotPoint>& points, int width = 480, int height = 360,
                  double x_min_hint = 2, double x_max_hint = 16);

}  // namespace dllmq::eval

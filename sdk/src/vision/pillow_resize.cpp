// Pillow's resampling (libImaging/Resample.c, ImagingResample with the BILINEAR filter) on
// 8-bit RGB, written out so that a resized image equals Pillow's exactly: ViTImageProcessor
// resizes through Pillow, and its output is what a model was trained on.
#include <cmath>
#include <string>

#include "tenax/core/error.h"
#include "tenax/sdk/vision/image.h"

namespace tenax::sdk {
namespace {

// Pillow: 32 bits minus 8 for the pixel value, minus 2 for the sign and the overflow.
constexpr int kPrecisionBits = 32 - 8 - 2;

double bilinear_filter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

struct Coefficients {
  int ksize = 0;
  std::vector<int> bounds;       // per output pixel: first input pixel, count
  std::vector<std::int32_t> kk;  // per output pixel: ksize fixed-point weights
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for the box [0, in_size).
Coefficients precompute(int in_size, int out_size) {
  constexpr double kSupport = 1.0;  // the bilinear filter's
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = kSupport * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<std::size_t>(out_size) * 2);
  c.kk.assign(static_cast<std::size_t>(out_size) * c.ksize, 0);
  std::vector<double> k(static_cast<std::size_t>(c.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);  // C truncation, as Pillow rounds
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[static_cast<std::size_t>(x)] = bilinear_filter((x + xmin - center + 0.5) * ss);
      ww += k[static_cast<std::size_t>(x)];
    }
    for (int x = 0; x < c.ksize; ++x) {
      double w = x < xmax ? k[static_cast<std::size_t>(x)] : 0.0;
      if (x < xmax && ww != 0.0) w /= ww;
      c.kk[static_cast<std::size_t>(xx) * c.ksize + x] =
          w < 0 ? static_cast<std::int32_t>(-0.5 + w * (1 << kPrecisionBits))
                : static_cast<std::int32_t>(0.5 + w * (1 << kPrecisionBits));
    }
    c.bounds[static_cast<std::size_t>(xx) * 2] = xmin;
    c.bounds[static_cast<std::size_t>(xx) * 2 + 1] = xmax;
  }
  return c;
}

std::uint8_t clip8(std::int64_t in) {
  if (in >= (std::int64_t{1} << kPrecisionBits << 8)) return 255;
  if (in <= 0) return 0;
  return static_cast<std::uint8_t>(in >> kPrecisionBits);
}

// Pillow's ImagingResampleHorizontal_8bpc over rows [offset, offset + out.height).
void resample_horizontal(Image& out, const Image& in, int offset, const Coefficients& c) {
  for (std::int64_t yy = 0; yy < out.height; ++yy) {
    const std::uint8_t* row = &in.rgb[static_cast<std::size_t>((yy + offset) * in.width * 3)];
    for (std::int64_t xx = 0; xx < out.width; ++xx) {
      const int xmin = c.bounds[static_cast<std::size_t>(xx) * 2];
      const int xmax = c.bounds[static_cast<std::size_t>(xx) * 2 + 1];
      const std::int32_t* k = &c.kk[static_cast<std::size_t>(xx) * c.ksize];
      for (int ch = 0; ch < 3; ++ch) {
        std::int32_t ss = 1 << (kPrecisionBits - 1);
        for (int x = 0; x < xmax; ++x) ss += row[(x + xmin) * 3 + ch] * k[x];
        out.rgb[static_cast<std::size_t>((yy * out.width + xx) * 3 + ch)] = clip8(ss);
      }
    }
  }
}

// Pillow's ImagingResampleVertical_8bpc.
void resample_vertical(Image& out, const Image& in, const Coefficients& c, int first_row) {
  for (std::int64_t yy = 0; yy < out.height; ++yy) {
    const int ymin = c.bounds[static_cast<std::size_t>(yy) * 2] - first_row;
    const int ymax = c.bounds[static_cast<std::size_t>(yy) * 2 + 1];
    const std::int32_t* k = &c.kk[static_cast<std::size_t>(yy) * c.ksize];
    for (std::int64_t xx = 0; xx < out.width; ++xx) {
      for (int ch = 0; ch < 3; ++ch) {
        std::int32_t ss = 1 << (kPrecisionBits - 1);
        for (int y = 0; y < ymax; ++y) {
          ss += in.rgb[static_cast<std::size_t>(((y + ymin) * in.width + xx) * 3 + ch)] * k[y];
        }
        out.rgb[static_cast<std::size_t>((yy * out.width + xx) * 3 + ch)] = clip8(ss);
      }
    }
  }
}

}  // namespace

Image resize_bilinear(const Image& image, std::int64_t height, std::int64_t width) {
  if (height <= 0 || width <= 0) {
    throw ConfigError("resize_bilinear: size " + std::to_string(height) + "x" + std::to_string(width) +
                      " must be positive");
  }
  if (height == image.height && width == image.width) return image;  // Pillow returns a copy
  const Coefficients horizontal = precompute(static_cast<int>(image.width), static_cast<int>(width));
  const Coefficients vertical = precompute(static_cast<int>(image.height), static_cast<int>(height));
  const bool need_horizontal = width != image.width;
  const bool need_vertical = height != image.height;
  // Pillow's ImagingResampleInner: the horizontal pass covers only the rows the vertical pass reads.
  const int first_row = vertical.bounds[0];
  const int last_row = vertical.bounds[static_cast<std::size_t>(height) * 2 - 2] +
                       vertical.bounds[static_cast<std::size_t>(height) * 2 - 1];
  Image current = image;
  int row_offset = 0;
  if (need_horizontal) {
    Image temp;
    temp.width = width;
    temp.height = need_vertical ? last_row - first_row : image.height;
    temp.rgb.resize(static_cast<std::size_t>(temp.width * temp.height * 3));
    resample_horizontal(temp, image, need_vertical ? first_row : 0, horizontal);
    current = std::move(temp);
    row_offset = need_vertical ? first_row : 0;
  }
  if (!need_vertical) return current;
  Image out;
  out.width = current.width;
  out.height = height;
  out.rgb.resize(static_cast<std::size_t>(out.width * out.height * 3));
  resample_vertical(out, current, vertical, row_offset);
  return out;
}

}  // namespace tenax::sdk

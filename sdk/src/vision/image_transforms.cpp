#include "tenax/sdk/vision/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

// SplitMix64: spreads (seed, epoch, index) over the generator's seed space, so neighbouring
// indices do not get correlated streams.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Written out rather than std::uniform_*_distribution, whose results differ between standard
// libraries: a checkpoint resumed by another build draws the same crops.
double uniform(std::mt19937_64& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

std::int64_t uniform_int(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {  // [lo, hi]
  return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}

}  // namespace

Image resize_shorter_edge(const Image& image, std::int64_t size) {
  if (size < 1) throw ConfigError("resize_shorter_edge: size must be >= 1, got " + std::to_string(size));
  const bool wide = image.width >= image.height;
  const std::int64_t shorter = wide ? image.height : image.width;
  const std::int64_t longer = wide ? image.width : image.height;
  if (shorter == size) return image;  // torchvision returns the image unchanged
  const auto other =
      static_cast<std::int64_t>(static_cast<double>(size) * static_cast<double>(longer) / static_cast<double>(shorter));
  return wide ? resize_bilinear(image, size, other) : resize_bilinear(image, other, size);
}

Image crop(const Image& image, const CropBox& box) {
  if (box.top < 0 || box.left < 0 || box.height < 1 || box.width < 1 || box.top + box.height > image.height ||
      box.left + box.width > image.width) {
    throw Error("crop: box (" + std::to_string(box.top) + ", " + std::to_string(box.left) + ", " +
                std::to_string(box.height) + "x" + std::to_string(box.width) + ") is outside the " +
                std::to_string(image.height) + "x" + std::to_string(image.width) + " image");
  }
  Image out;
  out.height = box.height;
  out.width = box.width;
  out.rgb.resize(static_cast<std::size_t>(box.height * box.width * 3));
  for (std::int64_t y = 0; y < box.height; ++y) {
    const auto* from = image.rgb.data() + ((box.top + y) * image.width + box.left) * 3;
    std::copy(from, from + box.width * 3, out.rgb.data() + y * box.width * 3);
  }
  return out;
}

Image center_crop(const Image& image, std::int64_t height, std::int64_t width) {
  if (height > image.height || width > image.width) {
    throw ConfigError("center_crop: a " + std::to_string(height) + "x" + std::to_string(width) + " crop of a " +
                      std::to_string(image.height) + "x" + std::to_string(image.width) +
                      " image; resize to at least the crop size first");
  }
  // Python's round: half to even, which std::nearbyint does in the default rounding mode.
  const auto top = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(image.height - height) / 2.0));
  const auto left = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(image.width - width) / 2.0));
  return crop(image, {top, left, height, width});
}

Image horizontal_flip(const Image& image) {
  Image out = image;
  for (std::int64_t y = 0; y < image.height; ++y) {
    for (std::int64_t x = 0; x < image.width; ++x) {
      const auto* from = image.rgb.data() + (y * image.width + (image.width - 1 - x)) * 3;
      std::copy(from, from + 3, out.rgb.data() + (y * image.width + x) * 3);
    }
  }
  return out;
}

CropBox random_resized_crop_box(std::int64_t height, std::int64_t width, std::pair<double, double> scale,
                                std::pair<double, double> ratio, std::mt19937_64& rng) {
  const double area = static_cast<double>(height * width);
  const double log_lo = std::log(ratio.first), log_hi = std::log(ratio.second);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * uniform(rng, scale.first, scale.second);
    const double aspect = std::exp(uniform(rng, log_lo, log_hi));
    const auto w = static_cast<std::int64_t>(std::nearbyint(std::sqrt(target_area * aspect)));
    const auto h = static_cast<std::int64_t>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const std::int64_t top = uniform_int(rng, 0, height - h);
      const std::int64_t left = uniform_int(rng, 0, width - w);
      return {top, left, h, w};
    }
  }
  // torchvision's fallback: the whole image, cut to the nearest allowed ratio, centred.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  std::int64_t w = width, h = height;
  if (in_ratio < ratio.first) {
    h = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(w) / ratio.first));
  } else if (in_ratio > ratio.second) {
    w = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(h) * ratio.second));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

std::mt19937_64 augmentation_rng(std::uint64_t seed, std::int64_t epoch, std::int64_t index) {
  return std::mt19937_64(mix(mix(mix(seed) ^ static_cast<std::uint64_t>(epoch)) ^ static_cast<std::uint64_t>(index)));
}

Image augment_or_resize(const Image& image, const ImageAugmentation& augmentation, std::int64_t epoch,
                        std::int64_t index, std::int64_t height, std::int64_t width) {
  if (augmentation.enabled) {
    auto rng = augmentation_rng(augmentation.seed, epoch, index);
    const CropBox box = random_resized_crop_box(image.height, image.width, augmentation.scale, augmentation.ratio, rng);
    Image out = resize_bilinear(crop(image, box), height, width);
    // The flip's draw follows the crop's, as torchvision's transforms run in that order.
    if (static_cast<double>(rng() >> 11) * 0x1.0p-53 < augmentation.flip_probability) out = horizontal_flip(out);
    return out;
  }
  if (image.height == height && image.width == width) return image;
  return resize_bilinear(image, height, width);
}

}  // namespace tenax::sdk

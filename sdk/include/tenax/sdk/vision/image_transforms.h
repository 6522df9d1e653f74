// The image transforms of transformers' run_image_classification.py (torchvision's, on Pillow
// images): for training RandomResizedCrop + RandomHorizontalFlip, for evaluation Resize (shorter
// edge) + CenterCrop — the geometry of torchvision's functions, the pixels of Pillow's bilinear
// resize (image.h). Normalisation is ViTImageProcessor's (rescale, mean, std).
//
// Randomness comes from an explicit seed, never from a global generator: a training image's
// crop and flip are a function of (seed, epoch, index), so every rank, every resumed run and a
// warm spare that takes a lost rank's place draw the same ones.
// Thread-safety: pure functions.
//
//   Image eval = center_crop(resize_shorter_edge(img, 224), 224, 224);
//   CropBox box = random_resized_crop_box(img.height, img.width, {0.08, 1.0}, {3.0 / 4, 4.0 / 3}, rng);
//   Image train = resize_bilinear(crop(img, box), 224, 224);
#pragma once

#include <cstdint>
#include <random>
#include <utility>

#include "tenax/sdk/vision/image.h"

namespace tenax::sdk {

struct CropBox {
  std::int64_t top = 0;
  std::int64_t left = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
};

/// torchvision Resize(size) with an int: the shorter edge becomes `size`, the longer one
/// int(size * long / short); Pillow's bilinear resize.
Image resize_shorter_edge(const Image& image, std::int64_t size);

/// torchvision CenterCrop: top = round((H - h) / 2), left = round((W - w) / 2), round half to even
/// as Python's round. Throws ConfigError when the image is smaller than the crop (torchvision
/// pads; an evaluation crop larger than its resize is a configuration mistake here).
Image center_crop(const Image& image, std::int64_t height, std::int64_t width);

/// The pixels inside `box` (which must lie within the image).
Image crop(const Image& image, const CropBox& box);

/// Mirrors left and right.
Image horizontal_flip(const Image& image);

/// torchvision RandomResizedCrop.get_params: ten tries at an area fraction uniform in `scale`
/// and a log-uniform aspect ratio in `ratio` that fit, else the centre crop of the clamped ratio.
CropBox random_resized_crop_box(std::int64_t height, std::int64_t width, std::pair<double, double> scale,
                                std::pair<double, double> ratio, std::mt19937_64& rng);

/// The generator of one training image's draws: a function of the three numbers only.
std::mt19937_64 augmentation_rng(std::uint64_t seed, std::int64_t epoch, std::int64_t index);

/// Training-time augmentation (run_image_classification.py's RandomResizedCrop and
/// RandomHorizontalFlip); `enabled = false` gives the evaluation transform.
struct ImageAugmentation {
  bool enabled = false;
  std::pair<double, double> scale = {0.08, 1.0};
  std::pair<double, double> ratio = {3.0 / 4.0, 4.0 / 3.0};
  double flip_probability = 0.5;
  std::uint64_t seed = 42;
};

/// The geometry of one image for a dataset that yields (height, width) images: with the
/// augmentation enabled, a random resized crop to that size and a flip, drawn from
/// (augmentation.seed, epoch, index); otherwise a resize to that size (run_image_classification.py's
/// Resize + CenterCrop to the processor's height and width: the crop takes the whole resized
/// image), or the image as it is when it already has that size.
Image augment_or_resize(const Image& image, const ImageAugmentation& augmentation, std::int64_t epoch,
                        std::int64_t index, std::int64_t height, std::int64_t width);

}  // namespace tenax::sdk

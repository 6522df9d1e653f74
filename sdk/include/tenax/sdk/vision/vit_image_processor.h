// ViTImageProcessor: transformers' image processor of the same name, images in, pixel_values out,
// equal to Python's (tests/sdk/vision: within 1e-6 on real PNG and JPEG images, 0 measured).
//
// The steps and their arithmetic are transformers': resize to size (Pillow's BILINEAR on 8-bit
// RGB, image.h), rescale by rescale_factor (in float64, stored as float32), normalize with
// image_mean / image_std (float32), channels first. The settings come from a model directory's
// preprocessor_config.json (transformers' defaults where it is absent or silent).
// Thread-safety: a plain value; preprocess is const.
//
//   auto processor = ViTImageProcessor::from_pretrained(model_dir);
//   torch::Tensor pixel_values = processor.preprocess({decode_image("cat.jpg")});  // [1, 3, H, W]
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/types.h>

#include "tenax/sdk/vision/image.h"

namespace tenax::sdk {

struct ViTImageProcessor {
  bool do_resize = true;
  std::int64_t height = 224;  ///< size["height"]
  std::int64_t width = 224;   ///< size["width"]
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<double, 3> image_mean = {0.5, 0.5, 0.5};  ///< IMAGENET_STANDARD_MEAN
  std::array<double, 3> image_std = {0.5, 0.5, 0.5};   ///< IMAGENET_STANDARD_STD

  /// `dir`/preprocessor_config.json (image_processor_type ViTImageProcessor or absent) over the
  /// defaults; the defaults when the file is absent. Throws ConfigError naming the file and key
  /// for a mistyped value, a resample other than BILINEAR (2), or a size it cannot use.
  static ViTImageProcessor from_pretrained(const std::filesystem::path& dir);
  /// As from_pretrained, on the JSON text; `where` names the source in errors.
  static ViTImageProcessor from_json_string(const std::string& text, const std::string& where);
  /// The preprocessor_config.json transformers writes for these settings.
  std::string to_json_string() const;

  /// One image: [3, height, width] float32 (the image's own size when do_resize is false).
  torch::Tensor preprocess(const Image& image) const;
  /// A batch of images of one size after resizing: [n, 3, height, width]. Throws ConfigError
  /// for an empty batch or (without do_resize) images of different sizes.
  torch::Tensor preprocess(const std::vector<Image>& images) const;
};

}  // namespace tenax::sdk

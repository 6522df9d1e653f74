#include "tenax/sdk/vision/vit_image_processor.h"

#include <nlohmann/json.hpp>

#include "models/config_json.h"
#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

using detail::ConfigJson;
using nlohmann::json;

// transformers' PILImageResampling.BILINEAR.
constexpr std::int64_t kBilinear = 2;

std::array<double, 3> read_triple(const ConfigJson& in, const char* key, std::array<double, 3> fallback) {
  const auto& j = in.document();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_number()) {
    const double v = it->get<double>();
    return {v, v, v};
  }
  if (!it->is_array() || it->size() != 3 || !(*it)[0].is_number() || !(*it)[1].is_number() || !(*it)[2].is_number()) {
    in.fail(key, "expected three numbers (one per RGB channel), got " + it->dump());
  }
  return {(*it)[0].get<double>(), (*it)[1].get<double>(), (*it)[2].get<double>()};
}

}  // namespace

ViTImageProcessor ViTImageProcessor::from_json_string(const std::string& text, const std::string& where) {
  const auto in = ConfigJson::from_string(text, where);
  ViTImageProcessor p;
  if (auto type = in.read_string("image_processor_type"); type && *type != "ViTImageProcessor") {
    in.fail("image_processor_type", "\"" + *type + "\" is not supported (only ViTImageProcessor)");
  }
  in.read_bool("do_resize", p.do_resize);
  in.read_bool("do_rescale", p.do_rescale);
  in.read_bool("do_normalize", p.do_normalize);
  in.read_double("rescale_factor", p.rescale_factor);
  std::int64_t resample = kBilinear;
  in.read_int("resample", resample);
  if (resample != kBilinear) {
    in.fail("resample", std::to_string(resample) + " is not supported: only BILINEAR (2), ViTImageProcessor's default");
  }
  const auto& j = in.document();
  if (auto it = j.find("size"); it != j.end() && !it->is_null()) {
    if (it->is_number_integer()) {
      p.height = p.width = it->get<std::int64_t>();
    } else if (it->is_object() && it->contains("height") && it->contains("width") &&
               (*it)["height"].is_number_integer() && (*it)["width"].is_number_integer()) {
      p.height = (*it)["height"].get<std::int64_t>();
      p.width = (*it)["width"].get<std::int64_t>();
    } else {
      in.fail("size", "expected {\"height\": H, \"width\": W} or an integer, got " + it->dump());
    }
  }
  if (p.height <= 0 || p.width <= 0) in.fail("size", "height and width must be positive");
  p.image_mean = read_triple(in, "image_mean", p.image_mean);
  p.image_std = read_triple(in, "image_std", p.image_std);
  for (double s : p.image_std) {
    if (!(s > 0.0)) in.fail("image_std", "must be positive");
  }
  return p;
}

ViTImageProcessor ViTImageProcessor::from_pretrained(const std::filesystem::path& dir) {
  const auto path = dir / "preprocessor_config.json";
  if (!std::filesystem::exists(path)) return ViTImageProcessor{};
  return from_json_string(ConfigJson::from_file(path).document().dump(), path.string());
}

std::string ViTImageProcessor::to_json_string() const {
  json j;
  j["image_processor_type"] = "ViTImageProcessor";
  j["do_resize"] = do_resize;
  j["size"] = {{"height", height}, {"width", width}};
  j["resample"] = kBilinear;
  j["do_rescale"] = do_rescale;
  j["rescale_factor"] = rescale_factor;
  j["do_normalize"] = do_normalize;
  j["image_mean"] = image_mean;
  j["image_std"] = image_std;
  return j.dump(2) + "\n";
}

torch::Tensor ViTImageProcessor::preprocess(const Image& image_in) const {
  if (image_in.height <= 0 || image_in.width <= 0 ||
      image_in.rgb.size() != static_cast<std::size_t>(image_in.height * image_in.width * 3)) {
    throw ConfigError("ViTImageProcessor: an empty or malformed image");
  }
  const Image image = do_resize ? resize_bilinear(image_in, height, width) : image_in;
  // uint8 HWC -> float. transformers: rescale is `image.astype(float64) * scale` then float32;
  // normalize is `(image - mean) / std` with float32 mean and std.
  auto x = torch::from_blob(const_cast<std::uint8_t*>(image.rgb.data()), {image.height, image.width, 3}, torch::kUInt8)
               .to(torch::kFloat64);
  if (do_rescale) x = x * rescale_factor;
  x = x.to(torch::kFloat32);
  if (do_normalize) {
    const auto options = torch::TensorOptions().dtype(torch::kFloat32);
    const auto mean = torch::tensor({image_mean[0], image_mean[1], image_mean[2]}, torch::kFloat64).to(options.dtype());
    const auto std = torch::tensor({image_std[0], image_std[1], image_std[2]}, torch::kFloat64).to(options.dtype());
    x = (x - mean) / std;
  }
  return x.permute({2, 0, 1}).contiguous();
}

torch::Tensor ViTImageProcessor::preprocess(const std::vector<Image>& images) const {
  if (images.empty()) throw ConfigError("ViTImageProcessor: an empty batch of images");
  std::vector<torch::Tensor> out;
  out.reserve(images.size());
  for (const Image& image : images) {
    out.push_back(preprocess(image));
    if (out.back().sizes() != out.front().sizes()) {
      throw ConfigError("ViTImageProcessor: images of different sizes in one batch (resize them: do_resize)");
    }
  }
  return torch::stack(out);
}

}  // namespace tenax::sdk

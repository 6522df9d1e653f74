// Image decoding, Pillow's bilinear resize and ViTImageProcessor against Python (Debian's
// Pillow 9.4 and transformers 4.44.2) on real files from Debian's python-matplotlib-data: a
// JPEG photograph and an RGBA PNG (tests/sdk/vision/goldens; tools/goldens/image_processor_goldens.py).
// Decoded and resized pixels must be identical (their XXH3-64 is the golden), pixel_values
// within 1e-6.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sdk/models/minilm_fixture.h"
#include "tenax/core/checksum.h"
#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/sdk/vision/image.h"
#include "tenax/sdk/vision/vit_image_processor.h"

namespace tenax::sdk {
namespace {
namespace fs = std::filesystem;

const fs::path kGoldens = fs::path(TENAX_SOURCE_DIR) / "tests" / "sdk" / "vision" / "goldens";

std::string hash(const Image& image) { return checksum_hex(xxh3_64(image.rgb.data(), image.rgb.size())); }

class ImageGoldens : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const fs::path file = fs::path(GetParam());
    golden_ = kGoldens / (file.stem().string() + ".safetensors");
    image_ = decode_image(kGoldens / "images" / file);
  }
  fs::path golden_;
  Image image_;
};

TEST_P(ImageGoldens, DecodesToPillowsRgbExactly) {
  const auto meta = test::read_golden_metadata(golden_);
  EXPECT_EQ(image_.height, std::stoll(meta.at("height")));
  EXPECT_EQ(image_.width, std::stoll(meta.at("width")));
  EXPECT_EQ(hash(image_), meta.at("rgb_xxh3_64"));
}

TEST_P(ImageGoldens, BilinearResizeIsPillowsBitForBit) {
  const auto meta = test::read_golden_metadata(golden_);
  int checked = 0;
  for (const auto& [key, value] : meta) {
    if (key.rfind("resized_", 0) != 0) continue;
    const auto x = key.find('x', 8);
    const std::int64_t h = std::stoll(key.substr(8, x - 8));
    const std::int64_t w = std::stoll(key.substr(x + 1));
    const Image resized = resize_bilinear(image_, h, w);
    ASSERT_EQ(resized.height, h);
    ASSERT_EQ(resized.width, w);
    EXPECT_EQ(hash(resized), value) << key;
    ++checked;
  }
  EXPECT_EQ(checked, 6);  // down and up, square and not, in either dimension
}

TEST_P(ImageGoldens, PixelValuesMatchTransformersViTImageProcessor) {
  const auto goldens = test::read_goldens(golden_);
  const auto configs = nlohmann::json::parse(files::read_all(kGoldens / "processors.json"));
  ASSERT_EQ(configs.size(), 3u);
  for (auto it = configs.begin(); it != configs.end(); ++it) {
    const auto processor = ViTImageProcessor::from_json_string(it.value().dump(), it.key());
    const torch::Tensor ours = processor.preprocess(std::vector<Image>{image_});
    const torch::Tensor& theirs = goldens.at("pixel_values_" + it.key());
    ASSERT_EQ(ours.sizes(), theirs.sizes()) << it.key();
    const double diff = (ours - theirs).abs().max().item<double>();
    std::cout << GetParam() << " " << it.key() << ": max |diff| " << diff << "\n";
    EXPECT_LE(diff, 1e-6) << it.key();
  }
}

INSTANTIATE_TEST_SUITE_P(RealImages, ImageGoldens,
                         ::testing::Values("grace_hopper.jpg", "Minduka_Present_Blue_Pack.png"),
                         [](const auto& info) { return fs::path(info.param).stem().string(); });

TEST(ViTImageProcessor, DefaultsAreTransformersAndConfigErrorsNameTheKey) {
  const ViTImageProcessor defaults;
  const auto written = nlohmann::json::parse(defaults.to_json_string());
  const auto theirs = nlohmann::json::parse(files::read_all(kGoldens / "processors.json"))["default"];
  for (const char* key : {"do_resize", "size", "resample", "do_rescale", "do_normalize", "image_mean", "image_std",
                          "image_processor_type"}) {
    EXPECT_EQ(written[key], theirs[key]) << key;
  }
  EXPECT_DOUBLE_EQ(written["rescale_factor"].get<double>(), theirs["rescale_factor"].get<double>());
  auto error_of = [](const std::string& text) {
    try {
      ViTImageProcessor::from_json_string(text, "p/preprocessor_config.json");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"({"resample": 3})").find("\"resample\": 3 is not supported"), std::string::npos);
  EXPECT_NE(error_of(R"({"image_mean": [0.5, 0.5]})").find("\"image_mean\": expected three numbers"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"size": {"shortest_edge": 224}})").find("\"size\": expected"), std::string::npos);
  EXPECT_NE(error_of(R"({"image_processor_type": "CLIPImageProcessor"})").find("is not supported"), std::string::npos);
  EXPECT_EQ(ViTImageProcessor::from_json_string(R"({"size": 64})", "x").height, 64);
  // A directory without preprocessor_config.json gets the defaults.
  EXPECT_EQ(ViTImageProcessor::from_pretrained(kGoldens / "images").to_json_string(), defaults.to_json_string());
}

TEST(ImageDecode, BadFilesAreStorageErrorsNamingTheFile) {
  EXPECT_THROW(decode_image(std::string("GIF89a........"), "a.gif"), StorageError);
  const std::string jpeg = files::read_all(kGoldens / "images" / "grace_hopper.jpg");
  try {  // libjpeg would pad it with grey; Pillow refuses a truncated file, and so do we
    decode_image(jpeg.substr(0, jpeg.size() / 3), "cut.jpg");
    ADD_FAILURE() << "decoded a truncated JPEG";
  } catch (const StorageError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.jpg: not a readable JPEG: the file is truncated"), std::string::npos)
        << e.what();
  }
  const std::string png = files::read_all(kGoldens / "images" / "Minduka_Present_Blue_Pack.png");
  EXPECT_THROW(decode_image(png.substr(0, png.size() / 2), "cut.png"), StorageError);
  EXPECT_THROW(decode_image(fs::path("/nonexistent/x.png")), StorageError);
  EXPECT_THROW(resize_bilinear(Image{2, 2, std::vector<std::uint8_t>(12)}, 0, 4), ConfigError);
}

}  // namespace
}  // namespace tenax::sdk

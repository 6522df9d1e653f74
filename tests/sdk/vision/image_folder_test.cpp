// The image folder of `tenax train` (ImageFolder, ImageFolderDataset) and the transforms of
// run_image_classification.py (image_transforms.h): torchvision's geometry, the seeded draws that
// make a resumed run see the same augmentation, and the errors that name the folder or file.
// The PNGs are written here (zlib, 8-bit RGB).
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tenax/core/error.h"
#include "tenax/sdk/image_folder_dataset.h"
#include "tenax/sdk/vision/image_transforms.h"

namespace tenax::sdk {
namespace {

namespace fs = std::filesystem;

Image gradient(std::int64_t height, std::int64_t width, int shade) {
  Image img;
  img.height = height;
  img.width = width;
  for (std::int64_t y = 0; y < height; ++y) {
    for (std::int64_t x = 0; x < width; ++x) {
      img.rgb.push_back(static_cast<std::uint8_t>((x * 7 + shade) % 256));
      img.rgb.push_back(static_cast<std::uint8_t>((y * 5 + shade) % 256));
      img.rgb.push_back(static_cast<std::uint8_t>(shade));
    }
  }
  return img;
}

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

void write_png(const fs::path& path, const Image& img) {
  const auto chunk = [](const std::string& kind, const std::string& data) {
    const std::string body = kind + data;
    return be32(static_cast<std::uint32_t>(data.size())) + body +
           be32(static_cast<std::uint32_t>(
               crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
  };
  std::string raw;
  for (std::int64_t y = 0; y < img.height; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(img.rgb.data() + y * img.width * 3),
               static_cast<std::size_t>(img.width * 3));
  }
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(size, '\0');
  compress(reinterpret_cast<Bytef*>(packed.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
           static_cast<uLong>(raw.size()));
  packed.resize(size);
  const std::string header = be32(static_cast<std::uint32_t>(img.width)) +
                             be32(static_cast<std::uint32_t>(img.height)) + std::string("\x08\x02\x00\x00\x00", 5);
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << std::string("\x89PNG\r\n\x1a\n", 8) << chunk("IHDR", header)
                                        << chunk("IDAT", packed) << chunk("IEND", "");
}

class ImageFolderFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("tenax_image_folder_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    for (int i = 0; i < 3; ++i) write_png(root_ / "dog" / ("d" + std::to_string(i) + ".png"), gradient(20, 30, i * 40));
    for (int i = 0; i < 2; ++i) write_png(root_ / "cat" / ("c" + std::to_string(i) + ".PNG"), gradient(30, 20, i * 90));
    std::ofstream(root_ / "cat" / "notes.txt") << "not an image";
  }
  void TearDown() override { fs::remove_all(root_); }
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  fs::path root_;
};

TEST(ImageTransforms, ResizeShorterEdgeAndCenterCropFollowTorchvision) {
  const Image tall = gradient(40, 20, 0);
  const Image resized = resize_shorter_edge(tall, 10);
  EXPECT_EQ(resized.width, 10);
  EXPECT_EQ(resized.height, 20);                                      // int(10 * 40 / 20)
  EXPECT_EQ(resize_shorter_edge(gradient(21, 50, 0), 10).width, 23);  // int(10 * 50 / 21) = 23
  // top = round((5 - 2) / 2) = round(1.5) = 2 (half to even), left = round((8 - 4) / 2) = 2.
  const Image src = gradient(5, 8, 3);
  const Image cut = center_crop(src, 2, 4);
  EXPECT_EQ(cut.rgb, crop(src, {2, 2, 2, 4}).rgb);
  EXPECT_EQ(cut.rgb[0], src.rgb[(2 * 8 + 2) * 3]);
  EXPECT_THROW(center_crop(src, 6, 4), ConfigError);
  const Image flipped = horizontal_flip(src);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(flipped.rgb[c], src.rgb[(8 - 1) * 3 + c]);
  EXPECT_EQ(horizontal_flip(flipped).rgb, src.rgb);
}

TEST(ImageTransforms, RandomResizedCropBoxesStayInsideAndFollowScaleAndRatio) {
  auto rng = augmentation_rng(42, 0, 0);
  for (int i = 0; i < 2000; ++i) {
    const CropBox b = random_resized_crop_box(50, 80, {0.08, 1.0}, {3.0 / 4, 4.0 / 3}, rng);
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, 50);
    ASSERT_LE(b.left + b.width, 80);
    const double area = static_cast<double>(b.height * b.width) / (50.0 * 80.0);
    EXPECT_GE(area, 0.05) << i;  // 0.08 less the rounding of a side
    const double ratio = static_cast<double>(b.width) / static_cast<double>(b.height);
    EXPECT_GE(ratio, 0.6) << i;
    EXPECT_LE(ratio, 1.6) << i;
  }
  // No box fits a 1x100 strip with these ratios: the fallback is the centred strip cut to 4:3.
  auto other = augmentation_rng(1, 0, 0);
  const CropBox strip = random_resized_crop_box(1, 100, {0.5, 1.0}, {3.0 / 4, 4.0 / 3}, other);
  EXPECT_EQ(strip.height, 1);
  EXPECT_EQ(strip.width, 1);
  EXPECT_EQ(strip.left, 49);
}

TEST(ImageTransforms, TheDrawsAreAFunctionOfSeedEpochAndIndexOnly) {
  auto a = augmentation_rng(42, 3, 17), b = augmentation_rng(42, 3, 17);
  EXPECT_EQ(a(), b());
  EXPECT_NE(augmentation_rng(42, 3, 17)(), augmentation_rng(42, 4, 17)());
  EXPECT_NE(augmentation_rng(42, 3, 17)(), augmentation_rng(42, 3, 18)());
  EXPECT_NE(augmentation_rng(42, 3, 17)(), augmentation_rng(43, 3, 17)());
}

TEST_F(ImageFolderFiles, ScanSortsClassesAndFilesAndIgnoresOtherFiles) {
  const ImageFolder folder = ImageFolder::scan(root_);
  EXPECT_EQ(folder.class_names, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(folder.files.size(), 5u);
  EXPECT_EQ(folder.files[0].filename(), "c0.PNG");
  EXPECT_EQ(folder.labels, (std::vector<std::int64_t>{0, 0, 1, 1, 1}));
  const ImageFolder ordered = ImageFolder::scan(root_, {"dog", "cat", "bird"});
  EXPECT_EQ(ordered.labels, (std::vector<std::int64_t>{1, 1, 0, 0, 0}));
  EXPECT_NE(error_of([&] { ImageFolder::scan(root_, {"dog"}); }).find("'cat' is not in the label list"),
            std::string::npos);
  fs::create_directories(root_ / "empty");
  const std::string why = error_of([&] { ImageFolder::scan(root_); });
  EXPECT_NE(why.find((root_ / "empty").string()), std::string::npos) << why;
  EXPECT_NE(why.find("no images"), std::string::npos) << why;
  EXPECT_NE(error_of([&] { ImageFolder::scan(root_ / "nowhere"); }).find("not a directory"), std::string::npos);
}

TEST_F(ImageFolderFiles, ExamplesAreTheProcessorsSizeAndAugmentedByEpoch) {
  ViTImageProcessor processor;
  processor.height = processor.width = 16;
  const ImageFolder folder = ImageFolder::scan(root_);
  const ImageFolderDataset eval(folder, processor);
  const Example e = eval.get(2);
  EXPECT_EQ(e.input.sizes(), (torch::IntArrayRef{3, 16, 16}));
  EXPECT_EQ(e.label.item<std::int64_t>(), 1);
  EXPECT_TRUE(torch::equal(eval.get_for_epoch(2, 5).input, e.input)) << "no augmentation: every epoch the same";

  ImageAugmentation augmentation;
  augmentation.enabled = true;
  const ImageFolderDataset train(folder, processor, augmentation);
  EXPECT_EQ(train.get_for_epoch(2, 1).input.sizes(), (torch::IntArrayRef{3, 16, 16}));
  EXPECT_TRUE(torch::equal(train.get_for_epoch(2, 1).input, train.get_for_epoch(2, 1).input));
  int differ = 0;
  for (std::int64_t epoch = 0; epoch < 8; ++epoch) {
    differ += !torch::equal(train.get_for_epoch(2, epoch).input, train.get_for_epoch(2, epoch + 1).input);
  }
  EXPECT_GE(differ, 6) << "the crops and flips change from epoch to epoch";
}

TEST_F(ImageFolderFiles, AnUndecodableImageOrMixedSizesWithoutResizeIsAConfigErrorNamingTheFile) {
  std::ofstream(root_ / "dog" / "broken.png", std::ios::binary) << "\x89PNG\r\n\x1a\nnot really";
  const std::string why = error_of([&] { ImageFolderDataset(ImageFolder::scan(root_), ViTImageProcessor{}); });
  EXPECT_NE(why.find("broken.png"), std::string::npos) << why;
  fs::remove(root_ / "dog" / "broken.png");
  ViTImageProcessor no_resize;
  no_resize.do_resize = false;
  const std::string sizes = error_of([&] { ImageFolderDataset(ImageFolder::scan(root_), no_resize); });
  EXPECT_NE(sizes.find("one size"), std::string::npos) << sizes;
}

}  // namespace
}  // namespace tenax::sdk

// The IDX reader and IdxImageDataset on small files written here (plain and gzip-compressed):
// shapes and bytes as written; every way a file can be wrong (missing, truncated in the header
// or the data, a cut gzip stream, a wrong magic, trailing bytes, a zero dimension, images and
// labels that do not pair) is a StorageError naming the file; examples are ViTImageProcessor's
// pixel_values of the gray image replicated to RGB.
#include <zlib.h>

#include <unistd.h>

#include <cstdint>
#include <functional>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tenax/core/error.h"
#include "tenax/sdk/idx_image_dataset.h"
#include "tenax/sdk/vision/idx_file.h"

namespace tenax::sdk {
namespace {
namespace fs = std::filesystem;

fs::path scratch() {
  static const fs::path dir = [] {
    auto d = fs::path(::testing::TempDir()) / ("tenax-idx-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& shape,
                      const std::vector<std::uint8_t>& data) {
  std::string out;
  auto put = [&out](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  put(magic);
  for (auto d : shape) put(d);
  out.append(data.begin(), data.end());
  return out;
}

fs::path write_plain(const std::string& name, const std::string& bytes) {
  const fs::path p = scratch() / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

fs::path write_gz(const std::string& name, const std::string& bytes) {
  const fs::path p = scratch() / name;
  gzFile f = gzopen(p.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
  return p;
}

// 3 images of 2 x 2 pixels, pixel values 0..11; labels 2, 0, 1.
std::vector<std::uint8_t> pixels() {
  std::vector<std::uint8_t> v(12);
  for (int i = 0; i < 12; ++i) v[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i * 20);
  return v;
}
const std::vector<std::uint8_t> kLabels = {2, 0, 1};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const StorageError& e) {
    return e.what();
  }
  return "(no StorageError)";
}

TEST(IdxFile, ReadsPlainAndGzipFilesAlike) {
  const std::string bytes = idx_bytes(0x803, {3, 2, 2}, pixels());
  for (const fs::path& p : {write_plain("a-idx3-ubyte", bytes), write_gz("a-idx3-ubyte.gz", bytes)}) {
    const IdxArray a = read_idx_ubyte(p, 3);
    EXPECT_EQ(a.shape, (std::vector<std::int64_t>{3, 2, 2})) << p;
    EXPECT_EQ(a.data, pixels()) << p;
  }
  const IdxArray labels = read_idx_ubyte(write_gz("l-idx1-ubyte.gz", idx_bytes(0x801, {3}, kLabels)), 1);
  EXPECT_EQ(labels.shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(labels.data, kLabels);
}

TEST(IdxFile, AMissingFileIsAnErrorNamingItAndThePackage) {
  const fs::path p = scratch() / "nowhere" / "train-images-idx3-ubyte.gz";
  const std::string e = error_of([&] { read_idx_ubyte(p, 3); });
  EXPECT_NE(e.find(p.string()), std::string::npos) << e;
  EXPECT_NE(e.find("cannot open"), std::string::npos) << e;
  EXPECT_NE(e.find("dataset-fashion-mnist"), std::string::npos) << e;
}

TEST(IdxFile, TruncatedDataIsAnErrorNamingTheFileAndTheSizes) {
  std::string bytes = idx_bytes(0x803, {3, 2, 2}, pixels());
  bytes.resize(bytes.size() - 5);
  for (const fs::path& p : {write_plain("cut-idx3-ubyte", bytes), write_gz("cut-idx3-ubyte.gz", bytes)}) {
    const std::string e = error_of([&] { read_idx_ubyte(p, 3); });
    EXPECT_NE(e.find(p.string()), std::string::npos) << e;
    EXPECT_NE(e.find("truncated: 7 of the 12 data bytes"), std::string::npos) << e;
  }
  const fs::path header = write_plain("header-idx3-ubyte", bytes.substr(0, 9));
  const std::string e = error_of([&] { read_idx_ubyte(header, 3); });
  EXPECT_NE(e.find(header.string() + ": truncated in its header"), std::string::npos) << e;
  const fs::path empty = write_plain("empty-idx3-ubyte", "");
  EXPECT_NE(error_of([&] { read_idx_ubyte(empty, 3); }).find("shorter than its 4-byte magic"), std::string::npos);
}

// A .gz file cut short (a partial download or copy): the gzip stream ends early.
TEST(IdxFile, ACutGzipStreamIsAnErrorNamingTheFile) {
  std::vector<std::uint8_t> big(4000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>((i * 7919) % 251);
  const fs::path whole = write_gz("whole-idx3-ubyte.gz", idx_bytes(0x803, {10, 20, 20}, big));
  std::ifstream in(whole, std::ios::binary);
  std::string compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path cut = write_plain("gzcut-idx3-ubyte.gz", compressed.substr(0, compressed.size() / 2));
  const std::string e = error_of([&] { read_idx_ubyte(cut, 3); });
  EXPECT_NE(e.find(cut.string()), std::string::npos) << e;
  EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("cannot read") != std::string::npos) << e;
}

TEST(IdxFile, AWrongMagicIsAnErrorSayingWhatWasExpected) {
  // The labels file where the images file belongs.
  const fs::path labels = write_plain("swapped-idx1-ubyte", idx_bytes(0x801, {3}, kLabels));
  std::string e = error_of([&] { read_idx_ubyte(labels, 3); });
  EXPECT_NE(e.find(labels.string() + ": magic 0x00000801, expected 0x00000803"), std::string::npos) << e;
  // Not an IDX file at all, and IDX of another element type (0x0D: float).
  const fs::path text = write_plain("text-idx3-ubyte", "hello, world");
  EXPECT_NE(error_of([&] { read_idx_ubyte(text, 3); }).find("magic 0x68656c6c"), std::string::npos);
  const fs::path floats = write_plain("float-idx1", idx_bytes(0xD01, {1}, {0, 0, 0, 0}));
  EXPECT_NE(error_of([&] { read_idx_ubyte(floats, 1); }).find("magic 0x00000d01"), std::string::npos);
}

TEST(IdxFile, TrailingBytesAndZeroDimensionsAreErrors) {
  std::vector<std::uint8_t> more = kLabels;
  more.push_back(9);
  const fs::path trailing = write_plain("long-idx1-ubyte", idx_bytes(0x801, {3}, more));
  std::string e = error_of([&] { read_idx_ubyte(trailing, 1); });
  EXPECT_NE(e.find(trailing.string() + ": more bytes than the 3"), std::string::npos) << e;
  const fs::path zero = write_plain("zero-idx3-ubyte", idx_bytes(0x803, {3, 0, 2}, {}));
  e = error_of([&] { read_idx_ubyte(zero, 3); });
  EXPECT_NE(e.find(zero.string() + ": dimension 1 is 0"), std::string::npos) << e;
  const fs::path huge = write_plain("huge-idx3-ubyte", idx_bytes(0x803, {70000, 70000, 28}, {}));
  e = error_of([&] { read_idx_ubyte(huge, 3); });
  EXPECT_NE(e.find("more than 2^32 bytes"), std::string::npos) << e;
}

ViTImageProcessor unresized() {
  ViTImageProcessor p;
  p.do_resize = false;
  return p;
}

TEST(IdxImageDataset, ExamplesAreTheProcessedGrayImageAsRgbAndTheLabel) {
  fs::create_directories(scratch() / "mnist");
  write_gz("mnist/train-images-idx3-ubyte.gz", idx_bytes(0x803, {3, 2, 2}, pixels()));
  write_gz("mnist/train-labels-idx1-ubyte.gz", idx_bytes(0x801, {3}, kLabels));
  const auto files = IdxImageFiles::mnist_layout(scratch() / "mnist", MnistSplit::kTrain);
  EXPECT_EQ(files.images, scratch() / "mnist" / "train-images-idx3-ubyte.gz");
  IdxImageDataset data(files, unresized());
  ASSERT_EQ(data.size(), 3);
  EXPECT_EQ(data.num_labels(), 3);
  EXPECT_EQ(data.height(), 2);
  const Example e = data.get(1);
  ASSERT_EQ(e.input.sizes(), (std::vector<std::int64_t>{3, 2, 2}));
  EXPECT_EQ(e.label.item<std::int64_t>(), 0);
  EXPECT_EQ(e.label.scalar_type(), torch::kInt64);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 2; ++y) {
      for (int x = 0; x < 2; ++x) {
        const double raw = (4 + y * 2 + x) * 20;  // image 1 holds pixels 4..7
        EXPECT_NEAR(e.input[c][y][x].item<float>(), (raw / 255.0 - 0.5) / 0.5, 1e-6) << c << y << x;
      }
    }
  }
  IdxImageDataset two(files, unresized(), 2);
  EXPECT_EQ(two.size(), 2);
  EXPECT_EQ(two.label(1), 0);
  EXPECT_THROW(two.get(2), std::out_of_range);
}

TEST(IdxImageDataset, PlainFilesAreFoundWhenThereIsNoGzip) {
  fs::create_directories(scratch() / "plain");
  write_plain("plain/t10k-images-idx3-ubyte", idx_bytes(0x803, {3, 2, 2}, pixels()));
  write_plain("plain/t10k-labels-idx1-ubyte", idx_bytes(0x801, {3}, kLabels));
  const auto files = IdxImageFiles::mnist_layout(scratch() / "plain", MnistSplit::kTest);
  EXPECT_EQ(files.labels, scratch() / "plain" / "t10k-labels-idx1-ubyte");
  EXPECT_EQ(IdxImageDataset(files, unresized()).size(), 3);
}

TEST(IdxImageDataset, ImagesAndLabelsThatDoNotPairAreAnErrorNamingBothFiles) {
  const fs::path images = write_plain("pair-images-idx3-ubyte", idx_bytes(0x803, {3, 2, 2}, pixels()));
  const fs::path labels = write_plain("pair-labels-idx1-ubyte", idx_bytes(0x801, {2}, {1, 2}));
  const std::string e = error_of([&] { IdxImageDataset({images, labels}, unresized()); });
  EXPECT_NE(e.find(images.string()), std::string::npos) << e;
  EXPECT_NE(e.find(labels.string() + " do not pair: 3 images but 2 labels"), std::string::npos) << e;
}

}  // namespace
}  // namespace tenax::sdk

#include "tenax/sdk/idx_image_dataset.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include <spdlog/fmt/fmt.h>
#include <torch/torch.h>

#include "tenax/core/error.h"
#include "tenax/sdk/vision/idx_file.h"

namespace tenax::sdk {
namespace {

std::filesystem::path gz_if_present(const std::filesystem::path& dir, const std::string& name) {
  const auto gz = dir / (name + ".gz");
  const auto plain = dir / name;
  // Neither present: name the .gz, the file Debian's package would have put there.
  return std::filesystem::exists(plain) && !std::filesystem::exists(gz) ? plain : gz;
}

}  // namespace

IdxImageFiles IdxImageFiles::mnist_layout(const std::filesystem::path& dir, MnistSplit split) {
  const std::string prefix = split == MnistSplit::kTrain ? "train" : "t10k";
  return {gz_if_present(dir, prefix + "-images-idx3-ubyte"), gz_if_present(dir, prefix + "-labels-idx1-ubyte")};
}

IdxImageFiles IdxImageFiles::beside(const std::filesystem::path& images) {
  std::string name = images.filename().string();
  const auto at = name.find("images-idx3");
  if (at == std::string::npos) {
    throw ConfigError(images.string() +
                      ": an IDX images file is named like MNIST's (train-images-idx3-ubyte[.gz]), so that its labels "
                      "file (train-labels-idx1-ubyte[.gz]) is found beside it; rename the pair");
  }
  name.replace(at, 11, "labels-idx1");
  return {images, images.parent_path() / name};
}

IdxImageDataset::IdxImageDataset(const IdxImageFiles& files, ViTImageProcessor processor, std::int64_t limit,
                                 ImageAugmentation augmentation)
    : processor_(std::move(processor)), augmentation_(augmentation) {
  if (limit < 0) throw ConfigError(fmt::format("IdxImageDataset: limit {} must be >= 0 (0: all)", limit));
  IdxArray images = read_idx_ubyte(files.images, 3);
  IdxArray labels = read_idx_ubyte(files.labels, 1);
  if (images.shape[0] != labels.shape[0]) {
    throw StorageError(fmt::format("IDX files {} and {} do not pair: {} images but {} labels", files.images.string(),
                                   files.labels.string(), images.shape[0], labels.shape[0]));
  }
  height_ = images.shape[1];
  width_ = images.shape[2];
  const std::int64_t n = limit > 0 ? std::min(limit, labels.shape[0]) : labels.shape[0];
  pixels_ = std::move(images.data);
  pixels_.resize(static_cast<std::size_t>(n * height_ * width_));
  pixels_.shrink_to_fit();
  labels_ = std::move(labels.data);
  labels_.resize(static_cast<std::size_t>(n));
  num_labels_ = labels_.empty() ? 0 : *std::max_element(labels_.begin(), labels_.end()) + 1;
}

Image IdxImageDataset::image(std::int64_t index) const {
  if (index < 0 || index >= size()) {
    throw std::out_of_range(fmt::format("IdxImageDataset: index {} out of [0, {})", index, size()));
  }
  Image image;
  image.height = height_;
  image.width = width_;
  image.rgb.resize(static_cast<std::size_t>(height_ * width_ * 3));
  const std::uint8_t* gray = pixels_.data() + index * height_ * width_;
  for (std::int64_t p = 0; p < height_ * width_; ++p) {
    std::fill_n(image.rgb.begin() + p * 3, 3, gray[p]);
  }
  return image;
}

std::int64_t IdxImageDataset::label(std::int64_t index) const {
  if (index < 0 || index >= size()) {
    throw std::out_of_range(fmt::format("IdxImageDataset: index {} out of [0, {})", index, size()));
  }
  return labels_[static_cast<std::size_t>(index)];
}

Example IdxImageDataset::get(std::int64_t index) const {
  return {processor_.preprocess(image(index)), torch::tensor(label(index), torch::kInt64)};
}

Example IdxImageDataset::get_for_epoch(std::int64_t index, std::int64_t epoch) const {
  if (!augmentation_.enabled) return get(index);
  const std::int64_t height = processor_.do_resize ? processor_.height : height_;
  const std::int64_t width = processor_.do_resize ? processor_.width : width_;
  ViTImageProcessor finish = processor_;
  finish.do_resize = false;  // the size is settled by the crop
  return {finish.preprocess(augment_or_resize(image(index), augmentation_, epoch, index, height, width)),
          torch::tensor(label(index), torch::kInt64)};
}

}  // namespace tenax::sdk

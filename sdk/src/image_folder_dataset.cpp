#include "tenax/sdk/image_folder_dataset.h"

#include <algorithm>
#include <cctype>

#include <torch/torch.h>

#include "tenax/core/error.h"
#include "tenax/sdk/vision/image_transforms.h"

namespace tenax::sdk {
namespace {

namespace fs = std::filesystem;

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

}  // namespace

ImageFolder ImageFolder::scan(const fs::path& root, const std::vector<std::string>& class_names) {
  if (!fs::is_directory(root)) {
    throw ConfigError(root.string() + " is not a directory; an image folder holds one sub-folder per class");
  }
  ImageFolder folder;
  folder.root = root;
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_directory()) found.push_back(entry.path().filename().string());
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) {
    throw ConfigError(root.string() + " has no class folders (the layout is " + root.string() +
                      "/CLASS/IMAGE.png|jpg)");
  }
  folder.class_names = class_names.empty() ? found : class_names;
  for (const auto& name : found) {
    const auto at = std::find(folder.class_names.begin(), folder.class_names.end(), name);
    if (at == folder.class_names.end()) {
      throw ConfigError((root / name).string() + ": class '" + name +
                        "' is not in the label list; add it, or remove the folder");
    }
    std::vector<fs::path> images;
    for (const auto& entry : fs::directory_iterator(root / name)) {
      if (entry.is_regular_file() && is_image_file(entry.path())) images.push_back(entry.path());
    }
    if (images.empty()) {
      throw ConfigError((root / name).string() +
                        ": class folder with no images (.png, .jpg, .jpeg); add images "
                        "or remove the folder");
    }
    std::sort(images.begin(), images.end());
    const auto label = static_cast<std::int64_t>(at - folder.class_names.begin());
    for (auto& image : images) {
      folder.files.push_back(std::move(image));
      folder.labels.push_back(label);
    }
  }
  return folder;
}

ImageFolderDataset::ImageFolderDataset(ImageFolder folder, ViTImageProcessor processor, ImageAugmentation augmentation)
    : folder_(std::move(folder)), processor_(processor), augmentation_(augmentation) {
  for (const auto& file : folder_.files) {
    Image image;
    try {
      image = decode_image(file);
    } catch (const Error& e) {
      throw ConfigError(std::string(e.what()) + "; replace or remove the file");
    }
    if (!processor_.do_resize && height_ == 0) height_ = image.height, width_ = image.width;
    if (!processor_.do_resize && (image.height != height_ || image.width != width_)) {
      throw ConfigError(file.string() + " is " + std::to_string(image.height) + "x" + std::to_string(image.width) +
                        " but " + folder_.files.front().string() + " is " + std::to_string(height_) + "x" +
                        std::to_string(width_) + "; without a resize in the image processor every image must " +
                        "have one size");
    }
  }
  if (processor_.do_resize) height_ = processor_.height, width_ = processor_.width;
}

Example ImageFolderDataset::get_for_epoch(std::int64_t index, std::int64_t epoch) const {
  if (index < 0 || index >= size()) {
    throw Error("ImageFolderDataset: index " + std::to_string(index) + " outside [0, " + std::to_string(size()) + ")");
  }
  const auto i = static_cast<std::size_t>(index);
  ViTImageProcessor finish = processor_;
  finish.do_resize = false;  // the size is settled here
  const Image image = augment_or_resize(decode_image(folder_.files[i]), augmentation_, epoch, index, height_, width_);
  return {finish.preprocess(image), torch::tensor(folder_.labels[i], torch::kInt64)};
}

}  // namespace tenax::sdk

// ImageFolderDataset: labeled images in the layout of torchvision's ImageFolder and the datasets
// library's `imagefolder` builder — ROOT/CLASS/NAME.{png,jpg,jpeg} — as a Dataset of ViT inputs,
// with run_image_classification.py's transforms: for evaluation a resize to the processor's size;
// for training RandomResizedCrop (scale, ratio) and a horizontal flip, drawn from
// (seed, epoch, index) (image_transforms.h), so every rank and every resumed run sees the same.
//
// The classes are the sub-folders, sorted (or a given list, in its order); every image is
// decoded once at construction, so an undecodable file or an empty class folder is a
// ConfigError naming it before any training; get() decodes the file again (the pixels are not
// kept: a folder of photos would not fit in memory on every rank).
// Thread-safety: immutable after construction; get() is safe from any thread.
//
//   auto processor = ViTImageProcessor::from_pretrained(model_dir);
//   auto train = std::make_shared<ImageFolderDataset>(ImageFolder::scan("beans/train"), processor,
//                                                      ImageAugmentation{}.seed(42));
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tenax/sdk/data.h"
#include "tenax/sdk/vision/image.h"
#include "tenax/sdk/vision/image_transforms.h"
#include "tenax/sdk/vision/vit_image_processor.h"

namespace tenax::sdk {

/// The files of an image folder and their classes.
struct ImageFolder {
  std::filesystem::path root;
  std::vector<std::string> class_names;  ///< id order
  std::vector<std::filesystem::path> files;
  std::vector<std::int64_t> labels;  ///< one per file

  /// Scans `root`: each sub-folder is a class, its .png/.jpg/.jpeg files (any case, sorted by
  /// name) its images; other files are ignored, as the imagefolder builder ignores them.
  /// `class_names` fixes the classes and their ids (a folder not in it is an error); empty:
  /// the sub-folders, sorted. Throws ConfigError naming the folder when `root` is not a
  /// directory, has no class folders, or a class folder has no images.
  static ImageFolder scan(const std::filesystem::path& root, const std::vector<std::string>& class_names = {});
};

class ImageFolderDataset final : public Dataset {
 public:
  /// Decodes every image once (see above). The output size is the processor's (height, width)
  /// when it resizes; without a resize every image must have the first one's size (ConfigError).
  ImageFolderDataset(ImageFolder folder, ViTImageProcessor processor, ImageAugmentation augmentation = {});

  std::int64_t size() const override { return static_cast<std::int64_t>(folder_.files.size()); }
  /// The evaluation transform (epoch 0 of the augmentation when it is enabled).
  Example get(std::int64_t index) const override { return get_for_epoch(index, 0); }
  Example get_for_epoch(std::int64_t index, std::int64_t epoch) const override;

  const ImageFolder& folder() const { return folder_; }

 private:
  ImageFolder folder_;
  ViTImageProcessor processor_;
  ImageAugmentation augmentation_;
  std::int64_t height_ = 0;
  std::int64_t width_ = 0;
};

}  // namespace tenax::sdk

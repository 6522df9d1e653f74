// IdxImageDataset: a labeled image set in MNIST's layout (a pair of IDX files: images N x H x W
// gray bytes, labels N bytes; MNIST, Fashion-MNIST, KMNIST) as a Dataset of ViT inputs. Each
// example is one image through a ViTImageProcessor, gray replicated to RGB first as Python's
// `Image.convert("RGB")` does, so the pixel_values are what transformers' processor makes of
// the same image: input float [3, H', W'], label int64 scalar. The raw bytes are kept (47 MB
// for Fashion-MNIST's 60,000 training images) and processed on get(), not all up front (a
// processed copy would be 12x larger on every rank).
// Thread-safety: immutable after construction; get() is const and safe to call concurrently.
//
//   auto files = IdxImageFiles::mnist_layout("/usr/share/datasets/fashion-mnist", MnistSplit::kTrain);
//   auto train = std::make_shared<IdxImageDataset>(files, ViTImageProcessor{} /* see below */);
//   Trainer trainer(model, args, train, context, image_collator());
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "tenax/sdk/data.h"
#include "tenax/sdk/vision/image.h"
#include "tenax/sdk/vision/image_transforms.h"
#include "tenax/sdk/vision/vit_image_processor.h"

namespace tenax::sdk {

/// MNIST's two splits, by the prefix of their file names.
enum class MnistSplit { kTrain, kTest };

/// Where a split's two IDX files are.
struct IdxImageFiles {
  std::filesystem::path images;  ///< N x H x W unsigned bytes
  std::filesystem::path labels;  ///< N unsigned bytes

  /// MNIST's file names in `dir`: train-{images-idx3,labels-idx1}-ubyte (kTrain) or t10k-...
  /// (kTest), each the gzip-compressed ".gz" file when it exists (Debian's packages ship those),
  /// else the plain one.
  static IdxImageFiles mnist_layout(const std::filesystem::path& dir, MnistSplit split);
  /// The labels file that MNIST's naming pairs with an images file: the same name with
  /// "images-idx3" read as "labels-idx1" (train-images-idx3-ubyte.gz -> train-labels-idx1-ubyte.gz).
  /// Throws ConfigError naming `images` when its name has no "images-idx3".
  static IdxImageFiles beside(const std::filesystem::path& images);
};

class IdxImageDataset final : public Dataset {
 public:
  /// Reads both files (read_idx_ubyte), keeping the first `limit` examples (0: all; for tests
  /// and quick runs). Throws StorageError naming the file when one is missing, truncated or
  /// not an IDX file of the right kind, and when the two disagree on the number of examples.
  /// With `augmentation` enabled, get_for_epoch() gives training images their random resized
  /// crop and flip (image_transforms.h) at the processor's size (the image's own without a resize).
  IdxImageDataset(const IdxImageFiles& files, ViTImageProcessor processor, std::int64_t limit = 0,
                  ImageAugmentation augmentation = {});

  std::int64_t size() const override { return static_cast<std::int64_t>(labels_.size()); }
  /// {processor.preprocess(image(index)), label(index) as int64}. Throws std::out_of_range.
  Example get(std::int64_t index) const override;
  /// get(), or the augmented training image of `epoch` when the augmentation is enabled.
  Example get_for_epoch(std::int64_t index, std::int64_t epoch) const override;

  /// The index-th image, gray replicated to RGB (before the processor).
  Image image(std::int64_t index) const;
  std::int64_t label(std::int64_t index) const;
  /// The largest label + 1: the classifier's outputs.
  std::int64_t num_labels() const { return num_labels_; }
  std::int64_t height() const { return height_; }
  std::int64_t width() const { return width_; }

 private:
  ViTImageProcessor processor_;
  ImageAugmentation augmentation_;
  std::int64_t height_ = 0;
  std::int64_t width_ = 0;
  std::int64_t num_labels_ = 0;
  std::vector<std::uint8_t> pixels_;  ///< size() x height x width
  std::vector<std::uint8_t> labels_;
};

}  // namespace tenax::sdk

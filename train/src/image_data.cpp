#include "image_data.h"

#include "tenax/core/error.h"
#include "tenax/sdk/image_collator.h"
#include "tenax/sdk/image_folder_dataset.h"

namespace tenax::train {
namespace {

sdk::ImageFolder scan(const std::string& dir, const std::string& key, const std::vector<std::string>& classes,
                      std::int64_t limit) {
  sdk::ImageFolder folder;
  try {
    folder = sdk::ImageFolder::scan(dir, classes);
  } catch (const ConfigError& e) {
    throw ConfigError("data." + key + ": " + e.what());
  }
  if (limit > 0 && static_cast<std::size_t>(limit) < folder.files.size()) {
    // The folder is sorted by class: keep every class by taking a strided subset, not a prefix.
    sdk::ImageFolder kept = folder;
    kept.files.clear();
    kept.labels.clear();
    for (std::int64_t i = 0; i < limit; ++i) {
      const auto at = static_cast<std::size_t>(i * static_cast<std::int64_t>(folder.files.size()) / limit);
      kept.files.push_back(folder.files[at]);
      kept.labels.push_back(folder.labels[at]);
    }
    return kept;
  }
  return folder;
}

}  // namespace

JobData load_image_data(const JobOptions& o, const sdk::ViTImageProcessor& processor) {
  if (o.choices.problem_type && *o.choices.problem_type != sdk::ProblemType::kSingleLabelClassification) {
    throw ConfigError(
        "model.problem_type: an image folder's job is single_label_classification (one class folder "
        "per image), got " +
        std::string(sdk::problem_type_name(*o.choices.problem_type)));
  }
  JobData data;
  const sdk::ImageFolder train = scan(o.data.train_dir, "train_dir", o.data.label_names, o.data.max_train_samples);
  data.label_names = train.class_names;
  if (data.label_names.size() < 2) {
    throw ConfigError("data.train_dir: " + o.data.train_dir +
                      " has one class folder only; a classifier needs two "
                      "or more");
  }
  sdk::ImageAugmentation augmentation;
  augmentation.enabled = o.data.augment;
  augmentation.scale = {o.data.crop_scale_min, o.data.crop_scale_max};
  augmentation.ratio = {o.data.crop_ratio_min, o.data.crop_ratio_max};
  augmentation.flip_probability = o.data.flip_probability;
  augmentation.seed = o.args.seed;
  data.train = std::make_shared<sdk::ImageFolderDataset>(train, processor, augmentation);
  if (!o.data.validation_dir.empty()) {
    data.validation = std::make_shared<sdk::ImageFolderDataset>(
        scan(o.data.validation_dir, "validation_dir", data.label_names, o.data.max_eval_samples), processor);
  }
  if (!o.data.test_dir.empty()) {
    data.test = std::make_shared<sdk::ImageFolderDataset>(
        scan(o.data.test_dir, "test_dir", data.label_names, o.data.max_predict_samples), processor);
  }
  data.collator = sdk::image_collator();
  data.summary = "train " + std::to_string(data.train->size()) + " images" +
                 (data.validation ? ", validation " + std::to_string(data.validation->size()) : "") +
                 (data.test ? ", test " + std::to_string(data.test->size()) : "") +
                 (o.data.augment ? " (training images augmented: random resized crop, flip)" : "");
  return data;
}

}  // namespace tenax::train

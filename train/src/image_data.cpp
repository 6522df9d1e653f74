#include "image_data.h"

#include "tenax/core/error.h"
#include "tenax/sdk/image_collator.h"
#include "tenax/sdk/idx_image_dataset.h"
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

sdk::ImageAugmentation augmentation_of(const JobOptions& o) {
  sdk::ImageAugmentation augmentation;
  augmentation.enabled = o.data.augment;
  augmentation.scale = {o.data.crop_scale_min, o.data.crop_scale_max};
  augmentation.ratio = {o.data.crop_ratio_min, o.data.crop_ratio_max};
  augmentation.flip_probability = o.data.flip_probability;
  augmentation.seed = o.args.seed;
  return augmentation;
}

std::shared_ptr<sdk::IdxImageDataset> read_idx(const std::string& path, const std::string& key,
                                               const sdk::ViTImageProcessor& processor, std::int64_t limit,
                                               const sdk::ImageAugmentation& augmentation = {}) {
  try {
    return std::make_shared<sdk::IdxImageDataset>(sdk::IdxImageFiles::beside(path), processor, limit, augmentation);
  } catch (const Error& e) {  // a missing, truncated or mismatched pair: the data's fault, not a restart's
    throw ConfigError("data." + key + ": " + e.what());
  }
}

// MNIST-style IDX files: labels are numbers 0..N-1, named by data.label_names (in id order) or
// by their number.
JobData load_idx_data(const JobOptions& o, const sdk::ViTImageProcessor& processor) {
  JobData data;
  const auto train = read_idx(o.data.train_file, "train_file", processor, o.data.max_train_samples, augmentation_of(o));
  std::shared_ptr<sdk::IdxImageDataset> validation;
  std::shared_ptr<sdk::IdxImageDataset> test;
  if (!o.data.validation_file.empty()) {
    validation = read_idx(o.data.validation_file, "validation_file", processor, o.data.max_eval_samples);
  }
  if (!o.data.test_file.empty()) test = read_idx(o.data.test_file, "test_file", processor, o.data.max_predict_samples);
  std::int64_t num_labels = train->num_labels();
  for (const auto& split : {validation, test}) {
    if (split) num_labels = std::max(num_labels, split->num_labels());
  }
  if (!o.data.label_names.empty()) {
    if (static_cast<std::int64_t>(o.data.label_names.size()) < num_labels) {
      throw ConfigError("data.label_names: " + std::to_string(o.data.label_names.size()) +
                        " names, but the IDX labels go up to " + std::to_string(num_labels - 1) +
                        "; name every class, in id order");
    }
    data.label_names = o.data.label_names;
  } else {
    for (std::int64_t i = 0; i < num_labels; ++i) data.label_names.push_back(std::to_string(i));
  }
  if (data.label_names.size() < 2) {
    throw ConfigError("data.train_file: " + o.data.train_file + " has one class only; a classifier needs two or more");
  }
  data.train = train;
  data.validation = validation;
  data.test = test;
  data.summary = "train " + std::to_string(train->size()) + " images of " + std::to_string(train->height()) + "x" +
                 std::to_string(train->width()) + " (IDX)" +
                 (validation ? ", validation " + std::to_string(validation->size()) : "") +
                 (test ? ", test " + std::to_string(test->size()) : "");
  return data;
}

JobData load_folder_data(const JobOptions& o, const sdk::ViTImageProcessor& processor) {
  JobData data;
  const sdk::ImageFolder train = scan(o.data.train_dir, "train_dir", o.data.label_names, o.data.max_train_samples);
  data.label_names = train.class_names;
  if (data.label_names.size() < 2) {
    throw ConfigError("data.train_dir: " + o.data.train_dir +
                      " has one class folder only; a classifier needs two "
                      "or more");
  }
  data.train = std::make_shared<sdk::ImageFolderDataset>(train, processor, augmentation_of(o));
  if (!o.data.validation_dir.empty()) {
    data.validation = std::make_shared<sdk::ImageFolderDataset>(
        scan(o.data.validation_dir, "validation_dir", data.label_names, o.data.max_eval_samples), processor);
  }
  if (!o.data.test_dir.empty()) {
    data.test = std::make_shared<sdk::ImageFolderDataset>(
        scan(o.data.test_dir, "test_dir", data.label_names, o.data.max_predict_samples), processor);
  }
  data.summary = "train " + std::to_string(data.train->size()) + " images" +
                 (data.validation ? ", validation " + std::to_string(data.validation->size()) : "") +
                 (data.test ? ", test " + std::to_string(data.test->size()) : "");
  return data;
}

}  // namespace

JobData load_image_data(const JobOptions& o, const sdk::ViTImageProcessor& processor) {
  if (o.choices.problem_type && *o.choices.problem_type != sdk::ProblemType::kSingleLabelClassification) {
    throw ConfigError("model.problem_type: an image job is single_label_classification (one class per image), got " +
                      std::string(sdk::problem_type_name(*o.choices.problem_type)));
  }
  JobData data =
      o.choices.image_source == ImageSource::kIdx ? load_idx_data(o, processor) : load_folder_data(o, processor);
  data.collator = sdk::image_collator();
  if (o.data.augment) data.summary += " (training images augmented: random resized crop, flip)";
  return data;
}

}  // namespace tenax::train

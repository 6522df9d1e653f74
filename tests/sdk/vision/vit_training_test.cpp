// The image path end to end in one process: a model directory's preprocessor_config.json makes
// the ViTImageProcessor, real images become pixel_values, image_collator batches them into
// Batch::pixel_values, the Trainer fine-tunes the transformers-made tiny ViT on them (the loss
// falls), and save_pretrained carries the processor's config along with the model.
#include <gtest/gtest.h>

#include <unistd.h>

#include "support/thread_ranks.h"
#include "tenax/core/files.h"
#include "tenax/sdk/image_collator.h"
#include "tenax/sdk/models/vit.h"
#include "tenax/sdk/trainer.h"
#include "tenax/sdk/vision/image.h"
#include "tenax/sdk/vision/vit_image_processor.h"

namespace tenax::sdk {
namespace {
namespace fs = std::filesystem;

const fs::path kSource = TENAX_SOURCE_DIR;
const fs::path kVitTiny = kSource / "tests" / "sdk" / "models" / "goldens" / "vit_tiny";

class ExampleList : public Dataset {
 public:
  explicit ExampleList(std::vector<Example> examples) : examples_(std::move(examples)) {}
  std::int64_t size() const override { return static_cast<std::int64_t>(examples_.size()); }
  Example get(std::int64_t i) const override { return examples_.at(static_cast<std::size_t>(i)); }

 private:
  std::vector<Example> examples_;
};

TEST(ViTTraining, ProcessedRealImagesTrainThroughTheTrainerAndTheProcessorIsSavedWithTheModel) {
  const auto processor = ViTImageProcessor::from_pretrained(kVitTiny);
  ASSERT_EQ(processor.height, 32);
  std::vector<Example> examples;
  const char* files[] = {"grace_hopper.jpg", "Minduka_Present_Blue_Pack.png"};
  for (int i = 0; i < 8; ++i) {
    const Image image = decode_image(kSource / "tests" / "sdk" / "vision" / "goldens" / "images" / files[i % 2]);
    torch::Tensor pixels = processor.preprocess(image);
    if ((i / 2) % 2 == 1) pixels = pixels.flip({2});              // mirrored copies
    if (i >= 4) pixels = pixels + 0.05 * static_cast<double>(i);  // and brighter ones
    examples.push_back({pixels, torch::tensor(static_cast<std::int64_t>(i % 2))});
  }
  auto data = std::make_shared<ExampleList>(examples);
  torch::manual_seed(11);
  auto model = ViTForImageClassification::from_pretrained(kVitTiny);

  const Batch all = stack_image_batch(examples);
  ASSERT_EQ(all.pixel_values.sizes(), (std::vector<std::int64_t>{8, 3, 32, 32}));
  auto eval_loss = [&] {
    torch::NoGradGuard no_grad;
    model->eval();
    return model->forward(all).loss.item<double>();
  };
  const double before = eval_loss();

  const fs::path out = fs::path(::testing::TempDir()) / ("tenax-vit-train-" + std::to_string(::getpid()));
  fs::remove_all(out);
  TrainingArguments args;
  args.output_dir = (out / "train").string();
  args.max_steps = 12;
  args.per_device_train_batch_size = 4;
  args.learning_rate = 3e-3;
  args.save_steps = 0;
  args.logging_steps = 4;
  args.disable_tqdm = true;
  args.report_to = {};
  elastic::WorkerContext context(elastic::WorkerIdentity{}, nullptr, testing::single_rank_communicator());
  Trainer trainer(model, args, data, context, image_collator());
  const TrainOutput trained = trainer.train();
  EXPECT_EQ(trained.global_step, 12);
  const double after = eval_loss();
  std::cout << "eval loss " << before << " -> " << after << "\n";
  EXPECT_LT(after, 0.5 * before);

  model->save_pretrained(out / "model");
  EXPECT_EQ(files::read_all(out / "model" / "preprocessor_config.json"),
            files::read_all(kVitTiny / "preprocessor_config.json"));
  auto reloaded = ViTForImageClassification::from_pretrained(out / "model");
  reloaded->eval();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(reloaded->forward(all).logits, model->forward(all).logits));
  std::error_code ec;
  fs::remove_all(out, ec);
}

TEST(ImageCollator, StacksImagesAndLabelsAndRefusesMixedShapes) {
  std::vector<Example> examples = {{torch::zeros({3, 4, 4}), torch::tensor(std::int64_t{1})},
                                   {torch::ones({3, 4, 4}), torch::tensor(std::int64_t{0})}};
  const Batch batch = image_collator()(examples);
  EXPECT_EQ(batch.pixel_values.sizes(), (std::vector<std::int64_t>{2, 3, 4, 4}));
  EXPECT_TRUE(torch::equal(batch.labels, torch::tensor({1, 0}, torch::kInt64)));
  EXPECT_EQ(batch.size(), 2);
  EXPECT_FALSE(batch.input_ids.defined());
  examples.push_back({torch::zeros({3, 5, 4}), torch::tensor(std::int64_t{0})});
  EXPECT_THROW(image_collator()(examples), Error);
  EXPECT_THROW(image_collator()({}), Error);
  // Batch::map reaches pixel_values like every other input (micro-batches, devices).
  const Batch halves = batch.map([](const torch::Tensor& t) { return t.narrow(0, 0, 1); });
  EXPECT_EQ(halves.pixel_values.size(0), 1);
  EXPECT_EQ(halves.labels.size(0), 1);
}

}  // namespace
}  // namespace tenax::sdk

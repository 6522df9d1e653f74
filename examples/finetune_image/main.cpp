// Trains a small Vision Transformer (ViTForImageClassification) on Fashion-MNIST through
// tenax::sdk::Trainer, data-parallel on the ranks `tenax run` starts, and reports the accuracy
// on the 10,000 held-out test images after every epoch (the Trainer's eval, in the log and
// metrics.jsonl) and at the end.
//
//   tenax run --nproc-per-node 2 -- ./finetune_image --output-dir runs/image
//       --epochs 3 --save-steps 100 --fail-at-step 150 --fail-rank 1   (one command line)
//   tenax run --nproc-per-node 2 -- ./finetune_image --config examples/finetune_image/finetune_image.toml
//
// The data: Debian's dataset-fashion-mnist (IDX files, IdxImageDataset), each 28x28 gray image
// replicated to RGB and normalised by ViTImageProcessor (rescale 1/255, mean 0.5, std 0.5; no
// resize), batched by image_collator. The model: a ViT of the [image] table's shape, initialised
// as transformers' _init_weights does from the seed (the same on every rank), trained from
// scratch: there are no pretrained weights for 28x28 gray images to start from.
//
// Rank 0 writes the trained model to <output-dir>/model (save_pretrained, plus the processor's
// preprocessor_config.json: transformers' ViTForImageClassification and ViTImageProcessor load
// it) and prints one line for scripts on stdout:
//   TENAX_RESULT {"test_accuracy":..,"test_loss":..,"train_samples_per_second":..,
//                 "train_runtime_s":..,"eval_runtime_s":..,"global_step":..,"resumed_from_step":..,
//                 "world_size":..}
// Exit codes: 0 done, 2 usage/configuration (bad flag, missing data), 3 preempted, 1 failure.
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "example_cli.h"
#include "fault_injection.h"
#include "options.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/files.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/idx_image_dataset.h"
#include "tenax/sdk/image_collator.h"
#include "tenax/sdk/metrics.h"
#include "tenax/sdk/models/vit.h"
#include "tenax/sdk/trainer.h"
#include "tenax/sdk/vision/vit_image_processor.h"

namespace {

namespace fs = std::filesystem;
using tenax::examples::ImageOptions;

// Fashion-MNIST's classes, by label id (the data set's README).
const std::vector<std::string> kFashionMnistClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                       "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// Missing data is a configuration error (exit 2: a restart cannot fix it) that says how to get it.
void require_data(const ImageOptions& o) {
  for (auto split : {tenax::sdk::MnistSplit::kTrain, tenax::sdk::MnistSplit::kTest}) {
    const auto files = tenax::sdk::IdxImageFiles::mnist_layout(o.data_dir, split);
    for (const auto& file : {files.images, files.labels}) {
      if (!fs::is_regular_file(file)) {
        throw tenax::ConfigError(file.string() + " is missing (--data-dir " + o.data_dir +
                                 "). Install Debian's dataset-fashion-mnist (`bash tools/bootstrap.sh` does), or "
                                 "pass --data-dir with MNIST-layout IDX files");
      }
    }
  }
}

std::map<std::string, double> accuracy_metrics(const tenax::sdk::PredictionOutput& p) {
  return {{"accuracy", tenax::sdk::accuracy(p.label_id_vector(), p.argmax_vector())}};
}

int run(const ImageOptions& o) {
  require_data(o);
  // Ranks share the machine's cores: a fixed, small thread count per rank avoids
  // oversubscription and keeps the arithmetic the same from run to run.
  torch::set_num_threads(static_cast<int>(o.threads));

  // ViTImageProcessor's defaults, without the resize: the images stay 28x28 and the model is
  // made for that size (a 224 resize would cost 64x the compute for no new information).
  tenax::sdk::ViTImageProcessor processor;
  processor.do_resize = false;
  auto train = std::make_shared<tenax::sdk::IdxImageDataset>(
      tenax::sdk::IdxImageFiles::mnist_layout(o.data_dir, tenax::sdk::MnistSplit::kTrain), processor, o.train_limit);
  auto test = std::make_shared<tenax::sdk::IdxImageDataset>(
      tenax::sdk::IdxImageFiles::mnist_layout(o.data_dir, tenax::sdk::MnistSplit::kTest), processor, o.eval_limit);
  processor.height = train->height();
  processor.width = train->width();
  if (train->height() != train->width() || test->height() != train->height() || test->width() != train->width()) {
    throw tenax::ConfigError("--data-dir " + o.data_dir +
                             ": the images must be square and of one size in both "
                             "splits (train " +
                             std::to_string(train->height()) + "x" + std::to_string(train->width()) + ", test " +
                             std::to_string(test->height()) + "x" + std::to_string(test->width()) + ")");
  }
  // The classes: the labels the training split uses (a small --train-limit must still see them
  // all to get the full head; Fashion-MNIST's first 256 images do), named when they are
  // Fashion-MNIST's 10.
  const std::int64_t num_labels = std::max(train->num_labels(), test->num_labels());
  tenax::sdk::Id2Label id2label;
  const bool fashion = num_labels == 10 && o.data_dir.find("fashion") != std::string::npos;
  for (std::int64_t i = 0; i < num_labels; ++i) {
    id2label[i] = fashion ? kFashionMnistClasses[static_cast<std::size_t>(i)] : "LABEL_" + std::to_string(i);
  }
  torch::manual_seed(o.args.seed);  // the initial weights: the same on every rank
  auto model = std::make_shared<tenax::sdk::ViTForImageClassification>(o.vit_config(train->height(), id2label));
  // Everything above is the same on every rank and needs no peer: it is made before the
  // WorkerContext, so that a warm spare (`tenax run --recovery in-process`) has it ready when it
  // is given a lost rank's place and only has to heal.
  auto context = tenax::elastic::WorkerContext::from_env();
  tenax::set_log_identity({context.rank(), static_cast<int>(context.generation()), "worker"});
  auto log = tenax::logger("example", tenax::LogPolicy::kRankZeroOnly);
  if (o.fail_at_step >= 0 && (o.fail_rank < 0 || o.fail_rank >= context.world_size())) {
    throw tenax::ConfigError("--fail-rank " + std::to_string(o.fail_rank) + " is not a rank of this world (size " +
                             std::to_string(context.world_size()) + ")");
  }
  log->info("data {}: train {} / test {} images of {}x{}, {} classes", o.data_dir, train->size(), test->size(),
            train->height(), train->width(), num_labels);
  std::int64_t parameters = 0;
  for (const auto& p : model->parameters()) parameters += p.numel();
  const auto& c = model->config();
  log->info(
      "model: ViTForImageClassification, patch {} ({} patches), hidden {}, {} layers x {} heads, "
      "intermediate {}: {} parameters",
      c.patch_size, c.patches_per_side() * c.patches_per_side(), c.hidden_size, c.num_hidden_layers,
      c.num_attention_heads, c.intermediate_size, parameters);

  tenax::sdk::Trainer trainer(model, o.args, train, context, tenax::sdk::image_collator());
  trainer.set_eval_dataset(test, accuracy_metrics);  // eval_strategy "epoch": held-out accuracy per epoch
  if (o.fail_at_step >= 0) {
    trainer.add_callback(std::make_shared<tenax::examples::FailureInjection>(
        o.fail_at_step, static_cast<int>(o.fail_rank), context.restart_count(), o.fail_signal_number()));
  }
  const tenax::sdk::TrainOutput trained = trainer.train();
  if (trained.preempted) {
    context.finalize();
    return tenax::kExitPreempted;
  }

  const auto predicted = trainer.predict(*test, accuracy_metrics, "test");
  const auto& m = predicted.metrics;
  log->info("held-out test: accuracy {:.4f}, loss {:.4f} on {} images", m.at("test_accuracy"), m.at("test_loss"),
            test->size());

  if (context.rank() == 0) {
    const fs::path model_dir = fs::path(o.args.output_dir) / "model";
    model->save_pretrained(model_dir);
    tenax::files::atomic_write(model_dir / "preprocessor_config.json", processor.to_json_string());
    log->info("trained model written to {}", model_dir.string());
    const nlohmann::json result = {{"test_accuracy", m.at("test_accuracy")},
                                   {"test_loss", m.at("test_loss")},
                                   {"train_samples_per_second", trained.train_samples_per_second},
                                   {"train_runtime_s", trained.train_runtime_s},
                                   {"eval_runtime_s", m.at("test_runtime")},
                                   {"global_step", trained.global_step},
                                   {"resumed_from_step", trained.resumed_from_step},
                                   {"world_size", context.world_size()}};
    std::cout << "TENAX_RESULT " << result.dump() << std::endl;
  }
  context.finalize();
  return tenax::kExitDone;
}

}  // namespace

int main(int argc, char** argv) {
  const ImageOptions options = tenax::examples::parse_options(argc, argv);
  return tenax::examples::run_example("finetune_image", [&options] { return run(options); });
}

#include "options.h"

#include <csignal>

#include "example_cli.h"
#include "tenax/core/error.h"
#include "tenax/sdk/training_arguments_io.h"

namespace tenax::examples {
namespace {

constexpr const char* kUsage =
    "usage: finetune_image [--config FILE.toml] [--KEY VALUE]... [--print-config]\n"
    "Trains a small ViT (ViTForImageClassification, from its initialisation) on Fashion-MNIST and\n"
    "reports the accuracy on the 10,000 held-out test images (each epoch and at the end).\n"
    "  --config FILE.toml  TrainingArguments keys at the top level of the file, this program's\n"
    "                      keys in an [image] table. examples/finetune_image/finetune_image.toml\n"
    "                      is the `make demo-image` job.\n"
    "  --KEY VALUE         any key below; the command line beats the file, which beats the\n"
    "                      defaults. --learning_rate 1e-3, --learning-rate=1e-3 (dashes or\n"
    "                      underscores)\n"
    "  --epochs X          the same as --num_train_epochs X\n"
    "  --print-config      print the resolved configuration as TOML and exit\n"
    "  --help              this text\n"
    "output_dir is required. data_dir defaults to /usr/share/datasets/fashion-mnist (Debian's\n"
    "dataset-fashion-mnist; tools/bootstrap.sh installs it). fail_at_step with fail_rank (and\n"
    "fail_signal KILL or STOP) injects a failure (tests, `make demo-image`). Unknown keys and bad\n"
    "values are errors (exit 2).\n"
    "Keys, types and defaults:\n";

void require(bool ok, const std::string& key, const std::string& why) {
  if (!ok) throw ConfigError("image." + key + ": " + why);
}

void validate(const ImageOptions& o) {
  require(!o.data_dir.empty(), "data_dir", "is required");
  for (const auto& [key, value] : {std::pair<const char*, std::int64_t>{"patch_size", o.patch_size},
                                   {"hidden_size", o.hidden_size},
                                   {"num_hidden_layers", o.num_hidden_layers},
                                   {"num_attention_heads", o.num_attention_heads},
                                   {"intermediate_size", o.intermediate_size},
                                   {"threads", o.threads}}) {
    require(value >= 1, key, "must be >= 1, got " + std::to_string(value));
  }
  require(o.hidden_size % o.num_attention_heads == 0, "hidden_size",
          "must be a multiple of num_attention_heads (" + std::to_string(o.num_attention_heads) + "), got " +
              std::to_string(o.hidden_size));
  require(o.train_limit >= 0, "train_limit", "must be >= 0 (0: all), got " + std::to_string(o.train_limit));
  require(o.eval_limit >= 0, "eval_limit", "must be >= 0 (0: all), got " + std::to_string(o.eval_limit));
  require(o.fail_at_step == -1 || o.fail_at_step >= 1, "fail_at_step",
          "must be >= 1 (or -1: none), got " + std::to_string(o.fail_at_step));
  require(o.fail_rank >= 0, "fail_rank", "must be >= 0, got " + std::to_string(o.fail_rank));
  require(o.fail_signal == "KILL" || o.fail_signal == "STOP", "fail_signal",
          "must be KILL or STOP, got '" + o.fail_signal + "'");
}

}  // namespace

int ImageOptions::fail_signal_number() const { return fail_signal == "STOP" ? SIGSTOP : SIGKILL; }

sdk::ViTConfig ImageOptions::vit_config(std::int64_t image_size, const sdk::Id2Label& id2label) const {
  sdk::ViTConfig config;
  config.image_size = image_size;
  config.patch_size = patch_size;
  config.num_channels = 3;  // gray replicated to RGB by the dataset, as Image.convert("RGB") does
  config.hidden_size = hidden_size;
  config.num_hidden_layers = num_hidden_layers;
  config.num_attention_heads = num_attention_heads;
  config.intermediate_size = intermediate_size;
  config.hidden_dropout_prob = hidden_dropout_prob;
  config.attention_probs_dropout_prob = attention_probs_dropout_prob;
  config.encoder_stride = patch_size;
  if (image_size % patch_size != 0) {
    throw ConfigError("image.patch_size: " + std::to_string(patch_size) + " does not divide the images' size " +
                      std::to_string(image_size) + " (for 28: 1, 2, 4, 7, 14 or 28)");
  }
  config.id2label = id2label;
  config.validate("finetune_image [image]");
  return config;
}

ImageOptions parse_options(int argc, char** argv) {
  ImageOptions o;
  // A small ViT from scratch wants a larger rate than a fine-tune; warmup and linear decay as
  // transformers' Trainer does them.
  o.args.num_train_epochs = 3.0;
  o.args.per_device_train_batch_size = 64;
  o.args.per_device_eval_batch_size = 250;
  o.args.learning_rate = 1e-3;
  o.args.weight_decay = 0.01;
  o.args.warmup_ratio = 0.05;
  o.args.eval_strategy = "epoch";
  o.args.save_steps = 100;
  o.args.save_total_limit = 2;
  o.args.logging_steps = 50;

  sdk::ArgumentParser parser(o.args);
  parser.add_section("image", [&o](auto&& field) { o.for_each_own_field(field); });
  parse_example_command_line(parser, argc, argv, "finetune_image", kUsage, [&o] { validate(o); });
  return o;
}

}  // namespace tenax::examples

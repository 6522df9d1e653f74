// The configuration of examples/finetune_image: TrainingArguments plus the example's own
// settings (the data, the ViT's shape, failure injection), from an optional TOML file
// (`--config FILE.toml`: TrainingArguments keys at the top level, the example's keys in an
// [image] table) and `--key value` flags, which win. A bad key or value is a configuration
// error: parse_options prints it and exits 2 (the launcher does not restart a job whose workers
// exit 2).
#pragma once

#include <cstdint>
#include <string>

#include "tenax/sdk/models/vit_config.h"
#include "tenax/sdk/training_arguments.h"

namespace tenax::examples {

struct ImageOptions {
  sdk::TrainingArguments args;
  /// MNIST-layout IDX files ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]); the default is
  /// where Debian's dataset-fashion-mnist puts them.
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  // The ViT, trained from Tenax's initialisation (transformers' _init_weights) drawn from the
  // seed. The images are the data's own size (28 for Fashion-MNIST): image_size is not a key.
  std::int64_t patch_size = 4;
  std::int64_t hidden_size = 64;
  std::int64_t num_hidden_layers = 4;
  std::int64_t num_attention_heads = 4;
  std::int64_t intermediate_size = 128;
  double hidden_dropout_prob = 0.0;
  double attention_probs_dropout_prob = 0.0;
  std::int64_t threads = 1;        ///< torch intra-op threads per rank
  std::int64_t train_limit = 0;    ///< first N training images only (0: all 60,000)
  std::int64_t eval_limit = 0;     ///< first N test images only (0: all 10,000)
  std::int64_t fail_at_step = -1;  ///< -1: no injected failure
  std::int64_t fail_rank = 0;
  /// KILL: the failing rank SIGKILLs itself; STOP: it SIGSTOPs itself (a hung worker, for
  /// `tenax run --hang-timeout`, or for a test that then kills it by pid from outside).
  std::string fail_signal = "KILL";

  /// The example's own settings (not `args`), by name: the [image] table and their --flags.
  template <typename Field>
  void for_each_own_field(Field&& field) {
    field("data_dir", data_dir);
    field("patch_size", patch_size);
    field("hidden_size", hidden_size);
    field("num_hidden_layers", num_hidden_layers);
    field("num_attention_heads", num_attention_heads);
    field("intermediate_size", intermediate_size);
    field("hidden_dropout_prob", hidden_dropout_prob);
    field("attention_probs_dropout_prob", attention_probs_dropout_prob);
    field("threads", threads);
    field("train_limit", train_limit);
    field("eval_limit", eval_limit);
    field("fail_at_step", fail_at_step);
    field("fail_rank", fail_rank);
    field("fail_signal", fail_signal);
  }
  /// SIGKILL or SIGSTOP.
  int fail_signal_number() const;

  /// The model's config for images of `image_size` pixels a side and the classes `id2label`.
  /// Throws ConfigError (naming the image.* key) when the shape does not validate.
  sdk::ViTConfig vit_config(std::int64_t image_size, const sdk::Id2Label& id2label) const;
};

/// Parses argv; on --help prints the usage and exits 0, with --print-config prints the resolved
/// configuration as TOML and exits 0, on a bad flag, file, key or value exits 2 naming it.
ImageOptions parse_options(int argc, char** argv);

}  // namespace tenax::examples

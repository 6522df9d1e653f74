// gradient_checkpointing (Model::set_gradient_checkpointing, checkpoint_activations): for BERT,
// DistilBERT and ViT in training mode, with dropout, the loss and every parameter's gradient are
// bit-identical to those without it, also under bf16 autocast (the recompute runs under the
// forward's autocast) and with the random stream left where the plain run leaves it (the
// recompute replays the forward's dropout draws without consuming new ones).
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "sdk/models/minilm_fixture.h"
#include "sdk/models/roundtrip_fixture.h"
#include "tenax/sdk/activation_checkpoint.h"
#include "tenax/sdk/autocast.h"
#include "tenax/sdk/models/bert.h"
#include "tenax/sdk/models/distilbert.h"
#include "tenax/sdk/models/vit.h"
#include "tenax/sdk/state_capture.h"

namespace tenax::sdk {
namespace {

struct Pass {
  torch::Tensor loss;
  std::vector<std::pair<std::string, torch::Tensor>> grads;
  torch::Tensor rng_after;
};

Pass train_pass(Model& model, const Batch& batch, bool checkpointing, bool bf16) {
  model.train();
  model.set_gradient_checkpointing(checkpointing);
  model.zero_grad();
  torch::manual_seed(2024);  // the same dropout draws for both passes
  torch::Tensor loss;
  {
    AutocastGuard autocast(torch::kCPU, bf16);
    loss = model.forward(batch).loss;
  }
  loss.backward();
  Pass pass{loss.detach().clone(), {}, capture_cpu_rng_state()};
  for (const auto& item : model.named_parameters()) {
    pass.grads.emplace_back(item.key(), item.value().grad().defined() ? item.value().grad().clone() : torch::Tensor());
  }
  model.set_gradient_checkpointing(false);
  return pass;
}

void expect_same_gradients(Model& model, const Batch& batch) {
  ASSERT_TRUE(model.supports_gradient_checkpointing());
  for (bool bf16 : {false, true}) {
    const Pass plain = train_pass(model, batch, false, bf16);
    const Pass recomputed = train_pass(model, batch, true, bf16);
    EXPECT_TRUE(torch::equal(plain.loss, recomputed.loss)) << "bf16 " << bf16;
    EXPECT_TRUE(torch::equal(plain.rng_after, recomputed.rng_after)) << "the random stream moved on differently";
    ASSERT_EQ(plain.grads.size(), recomputed.grads.size());
    int with_grad = 0;
    for (std::size_t i = 0; i < plain.grads.size(); ++i) {
      const auto& [name, g] = plain.grads[i];
      ASSERT_EQ(g.defined(), recomputed.grads[i].second.defined()) << name;
      if (!g.defined()) continue;
      ++with_grad;
      EXPECT_TRUE(torch::equal(g, recomputed.grads[i].second))
          << name << " (bf16 " << bf16 << "): max difference "
          << (g - recomputed.grads[i].second).abs().max().item<double>();
    }
    EXPECT_GT(with_grad, 10);
  }
  // Evaluation and no-grad forwards are plain calls: nothing to recompute.
  model.set_gradient_checkpointing(true);
  model.eval();
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(model.forward(batch).logits.requires_grad());
}

Batch text_batch(std::int64_t vocab) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  Batch batch;
  batch.input_ids = torch::randint(1, vocab, {4, 12}, gen, torch::kInt64);
  batch.attention_mask = torch::ones({4, 12}, torch::kInt64);
  batch.attention_mask.index_put_({0, torch::indexing::Slice(8, torch::indexing::None)}, 0);  // padding
  batch.labels = torch::tensor({0, 1, 1, 0}, torch::kInt64);
  return batch;
}

TEST(GradientCheckpointing, BertGradientsAreThoseWithoutIt) {
  BertConfig config;
  config.vocab_size = 100;
  config.hidden_size = 32;
  config.num_hidden_layers = 3;
  config.num_attention_heads = 4;
  config.intermediate_size = 64;
  config.max_position_embeddings = 32;
  torch::manual_seed(1);
  BertForSequenceClassification model(config);
  expect_same_gradients(model, text_batch(config.vocab_size));
}

TEST(GradientCheckpointing, DistilBertGradientsAreThoseWithoutIt) {
  auto model = DistilBertForSequenceClassification::from_pretrained(test::distilbert_tiny_dir(test::goldens_dir()));
  expect_same_gradients(*model, text_batch(model->config().vocab_size));
}

TEST(GradientCheckpointing, ViTGradientsAreThoseWithoutIt) {
  auto model = ViTForImageClassification::from_pretrained(test::goldens_dir() / "vit_tiny");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  Batch batch;
  batch.pixel_values = torch::randn({3, 3, 32, 32}, gen);
  batch.labels = torch::tensor({0, 2, 1}, torch::kInt64);
  expect_same_gradients(*model, batch);
}

// The layer's activations are not kept: its graph holds only the checkpoint's node, whose
// recompute in backward is counted here.
TEST(GradientCheckpointing, TheLayerRunsAgainInBackwardAndOnlyThen) {
  torch::manual_seed(3);
  torch::nn::Linear linear(8, 8);
  int calls = 0;
  auto layer = [&](const std::vector<torch::Tensor>& in) {
    ++calls;
    return torch::tanh(linear(in[0]));
  };
  torch::Tensor x = torch::randn({2, 8}, torch::requires_grad());
  torch::Tensor y = checkpoint_activations(layer, {x, torch::Tensor()});
  EXPECT_EQ(calls, 1);
  EXPECT_NE(y.grad_fn()->name().find("Checkpoint"), std::string::npos) << y.grad_fn()->name();
  y.sum().backward();
  EXPECT_EQ(calls, 2);
  const torch::Tensor checkpointed_x = x.grad().clone(), checkpointed_w = linear->weight.grad().clone();
  x.mutable_grad().reset();
  linear->weight.mutable_grad().reset();
  layer({x, torch::Tensor()}).sum().backward();
  EXPECT_TRUE(torch::equal(checkpointed_x, x.grad()));
  EXPECT_TRUE(torch::equal(checkpointed_w, linear->weight.grad()));
  // Without an input that needs a gradient (frozen embeddings), the call is a plain one, so the
  // layer's own parameters still get theirs.
  torch::Tensor frozen = torch::randn({2, 8});
  calls = 0;
  checkpoint_activations(layer, {frozen}).sum().backward();
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tenax::sdk

// Dynamic padding of tokenized text into int64 batches, and the TokenizedTextDataset that
// feeds it (on the fetched model and data).
#include "tenax/sdk/text_collator.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "tenax/core/error.h"
#include "tenax/sdk/tokenized_text_dataset.h"
#include "text/text_test_support.h"

namespace tenax::sdk {
namespace {

torch::Tensor longs(std::vector<std::int64_t> v) { return torch::tensor(v, torch::kInt64); }

TEST(TextCollator, PadsToTheBatchsLongest) {
  std::vector<Example> examples{
      {torch::stack({longs({101, 7, 102}), longs({0, 0, 0})}), longs({1}).squeeze()},
      {torch::stack({longs({101, 8, 102, 9, 102}), longs({0, 0, 0, 1, 1})}), longs({0}).squeeze()},
  };
  const Batch b = pad_text_batch(examples, /*pad_id=*/0);
  EXPECT_TRUE(
      torch::equal(b.input_ids, torch::tensor({101, 7, 102, 0, 0, 101, 8, 102, 9, 102}, torch::kInt64).view({2, 5})));
  EXPECT_TRUE(
      torch::equal(b.attention_mask, torch::tensor({1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, torch::kInt64).view({2, 5})));
  EXPECT_TRUE(
      torch::equal(b.token_type_ids, torch::tensor({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, torch::kInt64).view({2, 5})));
  EXPECT_TRUE(torch::equal(b.labels, longs({1, 0})));
  EXPECT_EQ(b.size(), 2);
  // A 1-D input is ids only; the pad id is the caller's.
  const Batch c = text_collator(5)({{longs({1, 2}), {}}, {longs({3}), {}}});
  EXPECT_TRUE(torch::equal(c.input_ids, torch::tensor({1, 2, 3, 5}, torch::kInt64).view({2, 2})));
  EXPECT_FALSE(c.labels.defined());
}

TEST(TextCollator, RejectsWhatItCannotPad) {
  EXPECT_THROW(pad_text_batch({}, 0), Error);
  EXPECT_THROW(pad_text_batch({{torch::zeros({3}), longs({1})}}, 0), Error);  // float
  EXPECT_THROW(pad_text_batch({{torch::zeros({3, 4}, torch::kInt64), longs({1})}}, 0), Error);
}

TEST(TextCollator, TokenizedValidationSplitBatches) {
  const auto tok = BertTokenizer::from_pretrained(test::asset("all-minilm-l6-v2"));
  const std::string dir = test::asset("data/rotten_tomatoes");
  const auto labels = LabelMap::from_records(read_text_records(dir + "/train.csv"));
  const auto records = read_text_records(dir + "/validation.csv");
  const TokenizedTextDataset dataset(records, labels, tok, /*max_length=*/32);
  ASSERT_EQ(dataset.size(), static_cast<std::int64_t>(records.size()));
  EXPECT_EQ(dataset.labels(), labels.ids(records));
  const Example first = dataset.get(0);
  EXPECT_EQ(first.input.size(0), 2);
  EXPECT_EQ(first.input[0][0].item<std::int64_t>(), tok.cls_id());
  EXPECT_EQ(
      first.input.size(1),
      static_cast<std::int64_t>(tok.encode(records.texts[0]).size() > 32 ? 32 : tok.encode(records.texts[0]).size()));
  std::vector<Example> batch;
  std::int64_t longest = 0;
  for (std::int64_t i = 0; i < 16; ++i) {
    batch.push_back(dataset.get(i));
    longest = std::max(longest, batch.back().input.size(1));
    EXPECT_LE(batch.back().input.size(1), 32);
  }
  const Batch b = text_collator(tok.pad_id())(batch);
  EXPECT_EQ(b.input_ids.sizes(), (std::vector<std::int64_t>{16, longest}));
  EXPECT_EQ(b.attention_mask.sum().item<std::int64_t>(), (b.input_ids != tok.pad_id()).sum().item<std::int64_t>());
  EXPECT_THROW(dataset.get(dataset.size()), Error);
}

}  // namespace
}  // namespace tenax::sdk

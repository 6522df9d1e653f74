// BertTokenizer against Hugging Face's BertTokenizerFast on the all-MiniLM-L6-v2 vocabulary:
// every input id, attention mask bit and token type id of the goldens that
// tools/goldens/tokenizer_goldens.py wrote (2,500 real review snippets, hard cases, pairs under
// every truncation strategy, padding; and 2,000 seeded random multi-script strings), and the
// same refusals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tenax/core/error.h"
#include "tenax/sdk/text/bert_tokenizer.h"
#include "text/text_test_support.h"

namespace tenax::sdk {
namespace {

using nlohmann::json;

EncodeOptions options_of(const json& o) {
  EncodeOptions options;
  if (!o.at("max_length").is_null()) options.max_length(o.at("max_length").get<std::int64_t>());
  const std::string t = o.at("truncation"), p = o.at("padding");
  if (t == "longest_first")
    options.truncation(Truncation::kLongestFirst);
  else if (t == "only_first")
    options.truncation(Truncation::kOnlyFirst);
  else if (t == "only_second")
    options.truncation(Truncation::kOnlySecond);
  else if (t != "none")
    throw std::runtime_error("unknown truncation " + t);
  if (p == "longest")
    options.padding(Padding::kLongest);
  else if (p == "max_length")
    options.padding(Padding::kMaxLength);
  else if (p != "none")
    throw std::runtime_error("unknown padding " + p);
  return options;
}

template <typename T>
std::vector<std::int64_t> widen(const std::vector<T>& v) {
  return std::vector<std::int64_t>(v.begin(), v.end());
}

struct Counts {
  std::size_t calls = 0, encodings = 0, refusals = 0, failures = 0;
};

// Runs every call of a goldens file, reporting the first 25 mismatches.
Counts check_goldens(const std::string& file) {
  Counts counts;
  std::size_t &calls = counts.calls, &encodings = counts.encodings;
  std::size_t &refusals = counts.refusals, &failures = counts.failures;
  const auto tokenizer = BertTokenizer::from_pretrained(test::asset("all-minilm-l6-v2"));
  const auto lines = test::read_gzip_lines(std::string(TENAX_TEXT_GOLDENS_DIR) + "/" + file);
  if (lines.empty()) throw std::runtime_error(file + " is empty");
  const json header = json::parse(lines.front()).at("header");
  EXPECT_EQ(header.at("records").get<std::size_t>(), lines.size() - 1) << file << " truncated?";

  for (std::size_t i = 1; i < lines.size(); ++i) {
    const json r = json::parse(lines[i]);
    const auto texts = r.at("texts").get<std::vector<std::string>>();
    const EncodeOptions options = options_of(r.at("options"));
    const bool pair = !r.at("pairs").is_null();
    auto run = [&] {
      return pair ? tokenizer.encode_batch(texts, r.at("pairs").get<std::vector<std::string>>(), options)
                  : tokenizer.encode_batch(texts, options);
    };
    ++calls;
    if (r.contains("error")) {
      ++refusals;
      bool threw = false;
      try {
        run();
      } catch (const ConfigError&) {
        threw = true;
      }
      if (!threw) {
        ++failures;
        ADD_FAILURE() << "line " << i + 1 << ": HF refused (" << r.at("error")
                      << ") but BertTokenizer did not: " << r.dump().substr(0, 400);
      }
      continue;
    }
    const json& expected = r.at("expected");
    const auto got = run();
    if (got.size() != expected.size()) {
      ++failures;
      ADD_FAILURE() << file << " line " << i + 1 << ": " << got.size() << " encodings, HF " << expected.size();
      continue;
    }
    for (std::size_t k = 0; k < got.size(); ++k, ++encodings) {
      const auto ids = expected[k].at("input_ids").get<std::vector<std::int64_t>>();
      const auto mask = expected[k].at("attention_mask").get<std::vector<std::int64_t>>();
      const auto types = expected[k].at("token_type_ids").get<std::vector<std::int64_t>>();
      if (widen(got[k].input_ids) != ids || widen(got[k].attention_mask) != mask ||
          widen(got[k].token_type_ids) != types) {
        if (++failures <= 25) {
          std::string mine, theirs;
          for (auto id : got[k].input_ids) mine += std::to_string(id) + " ";
          for (auto id : ids) theirs += std::to_string(id) + " ";
          ADD_FAILURE() << file << " line " << i + 1 << " item " << k << " text " << json(texts[k]).dump()
                        << " options " << r.at("options").dump() << "\n  tenax: " << mine << "\n  hf:    " << theirs;
        }
      }
    }
  }
  EXPECT_EQ(calls, lines.size() - 1);
  return counts;
}

TEST(TextBertTokenizerParity, EveryIdEqualsHuggingFace) {
  const Counts c = check_goldens("tokenizer_goldens.jsonl.gz");
  EXPECT_EQ(c.failures, 0u) << "of " << c.encodings << " encodings and " << c.refusals << " refusals";
  // The goldens cover what the generator promises; a shrunken file must not pass quietly.
  EXPECT_GE(c.encodings, 5000u);
  EXPECT_GE(c.refusals, 100u);
}

// Random strings over many scripts, with control, zero-width, unassigned and recently assigned
// characters: where a Unicode table of another version than HF's splits or normalises differently.
TEST(TextBertTokenizerParity, RandomMultiScriptEqualsHuggingFace) {
  const Counts c = check_goldens("tokenizer_goldens_multiscript.jsonl.gz");
  EXPECT_EQ(c.failures, 0u) << "of " << c.encodings << " encodings";
  EXPECT_GE(c.encodings, 2000u);
}

}  // namespace
}  // namespace tenax::sdk

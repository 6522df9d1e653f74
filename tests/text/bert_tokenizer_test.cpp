// BertTokenizer's own rules on a small hand-made vocabulary (WordPiece, truncation, padding,
// configuration errors), and its refusal of invalid UTF-8 on the real one.
#include "tenax/sdk/text/bert_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "tenax/core/error.h"
#include "text/text_test_support.h"

namespace tenax::sdk {
namespace {

// ids:        0      1      2      3      4       5     6     7       8        9     10
Vocab small_vocab() {
  return Vocab(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "hello", "!", "cafe", "a", "##a", "x"});
}

BertTokenizer small_tokenizer() { return BertTokenizer(small_vocab(), BertTokenizerConfig{}); }

std::vector<std::int32_t> ids(std::initializer_list<std::int32_t> v) { return v; }

TEST(TextBertTokenizer, WordPieceGreedyLongestMatchAndUnknown) {
  const auto tok = small_tokenizer();
  EXPECT_EQ(tok.tokenize("unaffable"), (std::vector<std::string>{"un", "##aff", "##able"}));
  // One unmatched piece makes the whole word [UNK]; the neighbours are untouched.
  EXPECT_EQ(tok.tokenize("hello unaffablez!"), (std::vector<std::string>{"hello", "[UNK]", "!"}));
  EXPECT_EQ(tok.encode("UNAFFABLE Café!").input_ids, ids({2, 5, 6, 7, 10, 9, 3}));
}

TEST(TextBertTokenizer, WordsLongerThanMaxInputCharsAreUnknown) {
  const auto tok = small_tokenizer();
  EXPECT_EQ(tok.tokenize(std::string(100, 'a')).size(), 100u);  // a ##a ##a ...
  EXPECT_EQ(tok.tokenize(std::string(101, 'a')), (std::vector<std::string>{"[UNK]"}));
}

TEST(TextBertTokenizer, SpecialTokensInTheTextAreMatchedCaseSensitively) {
  const auto tok = small_tokenizer();
  EXPECT_EQ(tok.tokenize("a[SEP]a"), (std::vector<std::string>{"a", "[SEP]", "a"}));
  EXPECT_EQ(tok.tokenize("[sep]"), (std::vector<std::string>{"[UNK]", "[UNK]", "[UNK]"}));
}

TEST(TextBertTokenizer, PairTruncationStrategies) {
  const auto tok = small_tokenizer();
  const std::string six = "a a a a a a", two = "x x";
  auto lengths = [&](Truncation t, std::int64_t max) {
    const Encoding e = tok.encode(six, two, EncodeOptions().truncation(t).max_length(max));
    std::size_t first = 0, second = 0;
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (e.input_ids[i] == 11) ++first;
      if (e.input_ids[i] == 13) ++second;
    }
    return std::make_pair(first, second);
  };
  EXPECT_EQ(lengths(Truncation::kNone, 5), std::make_pair(size_t{6}, size_t{2}));
  EXPECT_EQ(lengths(Truncation::kLongestFirst, 9), std::make_pair(size_t{4}, size_t{2}));
  EXPECT_EQ(lengths(Truncation::kLongestFirst, 6), std::make_pair(size_t{2}, size_t{1}));
  EXPECT_EQ(lengths(Truncation::kOnlyFirst, 8), std::make_pair(size_t{3}, size_t{2}));
  EXPECT_EQ(lengths(Truncation::kOnlySecond, 10), std::make_pair(size_t{6}, size_t{1}));
  // only_second cannot drop 3 tokens from a 2-token second sequence: refused, as HF does.
  EXPECT_THROW(lengths(Truncation::kOnlySecond, 8), ConfigError);
  EXPECT_THROW(tok.encode(six, EncodeOptions().truncation(Truncation::kOnlySecond).max_length(4)), ConfigError);
  EXPECT_THROW(tok.encode(six, EncodeOptions().truncation(Truncation::kLongestFirst).max_length(1)), ConfigError);
}

TEST(TextBertTokenizer, TokenTypesMaskAndPadding) {
  const auto tok = small_tokenizer();
  const Encoding e = tok.encode("a", "x x", EncodeOptions().padding(Padding::kMaxLength).max_length(9));
  EXPECT_EQ(e.input_ids, ids({2, 11, 3, 13, 13, 3, 0, 0, 0}));
  EXPECT_EQ(e.token_type_ids, (std::vector<std::uint8_t>{0, 0, 0, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(e.attention_mask, (std::vector<std::uint8_t>{1, 1, 1, 1, 1, 1, 0, 0, 0}));
  const auto batch = tok.encode_batch({"a", "a a a", ""}, EncodeOptions().padding(Padding::kLongest));
  for (const Encoding& b : batch) EXPECT_EQ(b.size(), 5u);
  EXPECT_EQ(batch[2].input_ids, ids({2, 3, 0, 0, 0}));
  EXPECT_THROW(tok.encode_batch({"a"}, {"a", "x"}), ConfigError);
}

TEST(TextBertTokenizer, SpecialTokenMissingFromVocabIsAConfigError) {
  BertTokenizerConfig config;
  config.mask_token = "<mask>";
  try {
    BertTokenizer(small_vocab(), config);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("<mask>"), std::string::npos) << e.what();
  }
}

TEST(TextBertTokenizer, ConfigFromDirectoryNamesFileAndKey) {
  const auto dir = std::filesystem::temp_directory_path() / "tenax_tokenizer_config_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << R"({"do_lower_case": false,
      "strip_accents": true, "unk_token": {"content": "[UNK]"}, "model_max_length": 64})";
  auto c = BertTokenizerConfig::from_directory(dir.string());
  EXPECT_FALSE(c.lowercase);
  EXPECT_EQ(c.strip_accents, std::optional<bool>(true));
  EXPECT_EQ(c.model_max_length, 64);
  std::ofstream(dir / "tokenizer.json") << R"({"normalizer": {"type": "NFKC"}})";
  try {
    BertTokenizerConfig::from_directory(dir.string());
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("normalizer.type"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
  EXPECT_THROW(BertTokenizer::from_pretrained(dir.string()), ConfigError);
}

TEST(TextBertTokenizer, InvalidUtf8IsAnErrorNamingTheByte) {
  const auto tok = small_tokenizer();
  const std::pair<std::string, std::size_t> cases[] = {
      {"ab\x80", 2},            // lone continuation byte
      {"a\xC3", 1},             // cut short
      {"\xC0\xAF", 0},          // overlong '/'
      {"xx\xE0\x80\xAF", 2},    // overlong, 3 bytes
      {"\xED\xA0\x80", 0},      // UTF-16 surrogate
      {"\xF4\x90\x80\x80", 0},  // above U+10FFFF
      {"\xFF", 0},              // never valid
      {"ok \xE2\x82", 3},       // cut short, 3 bytes
      {"\xE2\x28\xA1", 1},      // bad continuation
  };
  for (const auto& [bytes, offset] : cases) {
    try {
      tok.encode(bytes);
      ADD_FAILURE() << "accepted invalid UTF-8 at byte " << offset;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte " + std::to_string(offset)), std::string::npos)
          << e.what();
    }
    EXPECT_THROW(tok.encode("fine", bytes), Error);
  }
}

// Random bytes (mostly invalid) and random valid code points, on the real vocabulary: either a
// clean tenax::Error or a well-formed encoding, never a crash (run under ASan in build-asan).
TEST(TextBertTokenizer, RandomInputNeverCrashes) {
  const auto tok = BertTokenizer::from_pretrained(test::asset("all-minilm-l6-v2"));
  std::mt19937_64 rng(20240601);
  std::size_t rejected = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string bytes(rng() % 64, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() & 0xFF);
    try {
      const Encoding e = tok.encode(
          bytes, EncodeOptions().truncation(Truncation::kLongestFirst).max_length(32).padding(Padding::kMaxLength));
      EXPECT_EQ(e.size(), 32u);
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 2000u);  // random bytes are rarely valid UTF-8
  for (int round = 0; round < 3000; ++round) {
    std::u32string cps(rng() % 40, U'a');
    for (char32_t& c : cps) {
      do c = static_cast<char32_t>(rng() % 0x110000);
      while (c >= 0xD800 && c <= 0xDFFF);
    }
    std::string text;
    for (char32_t c : cps) {  // UTF-8 by hand, so the test does not trust the code under test
      if (c < 0x80)
        text += static_cast<char>(c);
      else if (c < 0x800)
        text += {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
      else if (c < 0x10000)
        text += {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
                 static_cast<char>(0x80 | (c & 0x3F))};
      else
        text += {static_cast<char>(0xF0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
                 static_cast<char>(0x80 | ((c >> 6) & 0x3F)), static_cast<char>(0x80 | (c & 0x3F))};
    }
    const Encoding e = tok.encode(text, "pair " + text);
    ASSERT_GE(e.size(), 3u);
    for (auto id : e.input_ids) ASSERT_LT(static_cast<std::size_t>(id), tok.vocab().size());
  }
}

}  // namespace
}  // namespace tenax::sdk

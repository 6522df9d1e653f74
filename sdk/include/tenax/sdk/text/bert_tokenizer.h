// BERT's WordPiece tokenizer with Hugging Face's semantics (BertTokenizerFast): token ids,
// attention masks and token type ids identical to HF's on real text (tested against goldens
// written by tools/goldens/tokenizer_goldens.py). No torch.
//
// Pipeline, as HF's `tokenizers` runs it:
//   1. special tokens written literally in the text ("[SEP]", case-sensitive) become their ids;
//   2. normalise the rest: drop NUL, U+FFFD and control/format/private-use characters, map
//      whitespace to ' ', put spaces around CJK ideographs, strip accents (NFD, then drop
//      non-spacing marks), lower-case;
//   3. split on whitespace and punctuation (Unicode P* and the ASCII symbols !"#$%&'()*+,-./:;
//      <=>?@[\]^_`{|}~);
//   Each character property is HF's own Unicode data, whatever its version (categories: Unicode
//   8.0, NFD: 9.0, case and whitespace: Rust's, 17.0), so that recently assigned characters are
//   split and normalised as HF does; random multi-script goldens check it.
//   4. WordPiece: greedy longest match, "##" continuation, a word longer than 100 characters or
//      with an unmatched piece becomes [UNK];
//   5. [CLS] A [SEP] (B [SEP]), truncation, padding.
// Input must be valid UTF-8: anything else throws tenax::Error naming the byte offset (a
// Python str cannot hold invalid UTF-8 either, so there is no HF behaviour to copy).
// Thread-safety: immutable after construction; const calls are safe from any thread.
//
//   auto tok = tenax::sdk::BertTokenizer::from_pretrained(".assets/all-minilm-l6-v2");
//   auto enc = tok.encode("A fine film.", tenax::sdk::EncodeOptions().max_length(128)
//                                             .truncation(tenax::sdk::Truncation::kLongestFirst));
//   // enc.input_ids == {101, 1037, 2986, 2143, 1012, 102}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tenax/sdk/text/vocab.h"

namespace tenax::sdk {

/// How BertTokenizer normalises and splits text. from_directory reads a Hugging Face model
/// directory; the defaults are bert-base-uncased's.
struct BertTokenizerConfig {
  bool clean_text = true;             ///< drop NUL/U+FFFD/control characters, whitespace -> ' '
  bool handle_chinese_chars = true;   ///< split CJK ideographs into words of their own
  std::optional<bool> strip_accents;  ///< unset: follows `lowercase` (HF's rule)
  bool lowercase = true;
  std::string unk_token = "[UNK]";
  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  std::string mask_token = "[MASK]";
  std::string continuing_subword_prefix = "##";
  std::size_t max_input_chars_per_word = 100;
  /// Used for max_length when truncation or max-length padding is asked without one.
  std::int64_t model_max_length = 512;
  /// Tokens matched literally in the raw text before normalisation (HF's added special
  /// tokens with normalized=false). Empty: the five tokens above.
  std::vector<std::string> special_tokens;

  /// Reads `dir`/tokenizer.json (what BertTokenizerFast uses: its BertNormalizer, WordPiece
  /// model and added tokens) when present, else `dir`/tokenizer_config.json (do_lower_case,
  /// strip_accents, tokenize_chinese_chars, the special tokens); model_max_length comes from
  /// tokenizer_config.json. Both missing: the defaults. Throws ConfigError naming the file and
  /// key for a value it cannot honour (e.g. a normalizer that is not BertNormalizer).
  static BertTokenizerConfig from_directory(const std::string& dir);
};

/// Which sequence loses tokens when an encoding exceeds max_length (HF's names).
enum class Truncation { kNone, kLongestFirst, kOnlyFirst, kOnlySecond };
/// kLongest pads to the longest encoding of an encode_batch call; kMaxLength to max_length.
enum class Padding { kNone, kLongest, kMaxLength };

/// Options of one encode call. max_length unset: the tokenizer's model_max_length.
class EncodeOptions {
 public:
  EncodeOptions& max_length(std::int64_t value) {
    max_length_ = value;
    return *this;
  }
  EncodeOptions& truncation(Truncation value) {
    truncation_ = value;
    return *this;
  }
  EncodeOptions& padding(Padding value) {
    padding_ = value;
    return *this;
  }

  std::optional<std::int64_t> max_length() const { return max_length_; }
  Truncation truncation() const { return truncation_; }
  Padding padding() const { return padding_; }

 private:
  std::optional<std::int64_t> max_length_;
  Truncation truncation_ = Truncation::kNone;
  Padding padding_ = Padding::kNone;
};

/// One encoded text or pair; the three vectors have the same length.
struct Encoding {
  std::vector<std::int32_t> input_ids;
  std::vector<std::uint8_t> attention_mask;  ///< 1 for tokens, 0 for padding
  std::vector<std::uint8_t> token_type_ids;  ///< 0 for [CLS] A [SEP], 1 for B [SEP]
  std::size_t size() const { return input_ids.size(); }
};

class BertTokenizer {
 public:
  /// Throws ConfigError when a special token of `config` is not in `vocab`.
  BertTokenizer(Vocab vocab, BertTokenizerConfig config);

  /// `dir`/vocab.txt plus BertTokenizerConfig::from_directory(dir).
  static BertTokenizer from_pretrained(const std::string& dir);

  /// The WordPiece tokens of `text` (no [CLS]/[SEP], no truncation).
  std::vector<std::string> tokenize(std::string_view text) const;

  /// [CLS] text [SEP], truncated and padded as `options` say.
  Encoding encode(std::string_view text, const EncodeOptions& options = {}) const;
  /// [CLS] first [SEP] second [SEP]. Throws ConfigError when kOnlyFirst/kOnlySecond cannot
  /// reach max_length by cutting that sequence alone (as HF does).
  Encoding encode(std::string_view first, std::string_view second, const EncodeOptions& options = {}) const;
  /// Encodes each text; Padding::kLongest pads all to the longest of the batch.
  std::vector<Encoding> encode_batch(const std::vector<std::string>& texts, const EncodeOptions& options = {}) const;
  /// Pairs texts[i] with pairs[i] (the two vectors must have the same size).
  std::vector<Encoding> encode_batch(const std::vector<std::string>& texts, const std::vector<std::string>& pairs,
                                     const EncodeOptions& options = {}) const;

  const Vocab& vocab() const { return vocab_; }
  const BertTokenizerConfig& config() const { return config_; }
  std::int32_t pad_id() const { return pad_id_; }
  std::int32_t cls_id() const { return cls_id_; }
  std::int32_t sep_id() const { return sep_id_; }
  std::int32_t unk_id() const { return unk_id_; }
  std::int32_t mask_id() const { return mask_id_; }

 private:
  /// Token ids of one sequence before special tokens, truncation and padding.
  std::vector<std::int32_t> sequence_ids(std::string_view text) const;
  void append_segment_ids(std::string_view segment, std::vector<std::int32_t>& ids) const;
  Encoding assemble(std::vector<std::int32_t> first, std::optional<std::vector<std::int32_t>> second,
                    const EncodeOptions& options) const;
  void pad(Encoding& encoding, std::size_t length) const;

  Vocab vocab_;
  BertTokenizerConfig config_;
  std::int32_t pad_id_, cls_id_, sep_id_, unk_id_, mask_id_;
  /// Literal special tokens and their ids, longest first (leftmost-longest matching).
  std::vector<std::pair<std::string, std::int32_t>> special_;
};

}  // namespace tenax::sdk

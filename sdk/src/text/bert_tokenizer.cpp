#include "tenax/sdk/text/bert_tokenizer.h"

#include <algorithm>

#include "tenax/core/error.h"
#include "text/basic_tokenizer.h"
#include "text/utf8.h"
#include "text/wordpiece.h"

namespace tenax::sdk {
namespace {

constexpr std::size_t kSpecialTokensSingle = 2;  // [CLS] A [SEP]
constexpr std::size_t kSpecialTokensPair = 3;    // [CLS] A [SEP] B [SEP]

std::size_t resolve_max_length(const EncodeOptions& options, const BertTokenizerConfig& config) {
  const std::int64_t n = options.max_length().value_or(config.model_max_length);
  if (n <= 0) {
    throw ConfigError("EncodeOptions.max_length: " + std::to_string(n) + " must be >= 1");
  }
  return static_cast<std::size_t>(n);
}

// Hugging Face tokenizers' truncate_encodings (utils/truncation.rs), lengths only.
void truncate(std::vector<std::int32_t>& first, std::vector<std::int32_t>* second, Truncation strategy,
              std::size_t max_length) {
  const std::size_t added = second ? kSpecialTokensPair : kSpecialTokensSingle;
  const std::size_t n1 = first.size(), n2 = second ? second->size() : 0;
  if (n1 + n2 + added <= max_length) return;
  if (max_length < added) {
    throw ConfigError("EncodeOptions.max_length: " + std::to_string(max_length) + " leaves no room for the " +
                      std::to_string(added) + " special tokens; use at least " + std::to_string(added + 1));
  }
  const std::size_t budget = max_length - added;
  switch (strategy) {
    case Truncation::kNone: return;
    case Truncation::kLongestFirst: {
      if (!second) {
        first.resize(budget);
        return;
      }
      // Shorter one kept whole when it fits in half; otherwise both get half, the longer
      // one the odd token (the first one on a tie goes second).
      std::size_t a = n1, b = n2;
      const bool swap = a > b;
      if (swap) std::swap(a, b);
      b = a > budget ? a : std::max(a, budget - a);
      if (a + b > budget) {
        a = budget / 2;
        b = a + budget % 2;
      }
      if (swap) std::swap(a, b);
      first.resize(std::min(first.size(), a));
      second->resize(std::min(second->size(), b));
      return;
    }
    case Truncation::kOnlyFirst:
    case Truncation::kOnlySecond: {
      std::vector<std::int32_t>* target = strategy == Truncation::kOnlyFirst ? &first : second;
      const char* name = strategy == Truncation::kOnlyFirst ? "only_first" : "only_second";
      if (!target) {
        throw ConfigError(std::string("Truncation ") + name +
                          " needs a text pair; use longest_first for a single text");
      }
      const std::size_t to_remove = n1 + n2 + added - max_length;
      if (target->size() <= to_remove) {
        throw ConfigError(std::string("Truncation ") + name + ": max_length " + std::to_string(max_length) +
                          " cannot be reached by cutting that " + "sequence alone (" + std::to_string(target->size()) +
                          " tokens, " + std::to_string(to_remove) +
                          " to remove); use longest_first or a larger max_length");
      }
      target->resize(target->size() - to_remove);
      return;
    }
  }
}

}  // namespace

BertTokenizer::BertTokenizer(Vocab vocab, BertTokenizerConfig config)
    : vocab_(std::move(vocab)), config_(std::move(config)) {
  pad_id_ = vocab_.at(config_.pad_token, "BertTokenizer pad_token");
  cls_id_ = vocab_.at(config_.cls_token, "BertTokenizer cls_token");
  sep_id_ = vocab_.at(config_.sep_token, "BertTokenizer sep_token");
  unk_id_ = vocab_.at(config_.unk_token, "BertTokenizer unk_token");
  mask_id_ = vocab_.at(config_.mask_token, "BertTokenizer mask_token");
  if (config_.special_tokens.empty()) {
    config_.special_tokens = {config_.pad_token, config_.unk_token, config_.cls_token, config_.sep_token,
                              config_.mask_token};
  }
  for (const std::string& token : config_.special_tokens) {
    if (token.empty()) throw ConfigError("BertTokenizer: an empty special token");
    utf8::decode(token, "BertTokenizer special token");
    special_.emplace_back(token, vocab_.at(token, "BertTokenizer special token"));
  }
  // Longest first, so that at one position the longest token wins (leftmost-longest).
  std::stable_sort(special_.begin(), special_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

BertTokenizer BertTokenizer::from_pretrained(const std::string& dir) {
  BertTokenizerConfig config = BertTokenizerConfig::from_directory(dir);
  return BertTokenizer(Vocab::from_file(dir + "/vocab.txt"), std::move(config));
}

void BertTokenizer::append_segment_ids(std::string_view segment, std::vector<std::int32_t>& ids) const {
  const basic_tokenizer::Flags flags{config_.clean_text, config_.handle_chinese_chars,
                                     config_.strip_accents.value_or(config_.lowercase), config_.lowercase};
  const std::u32string normalised = basic_tokenizer::normalize(utf8::decode(segment, "BertTokenizer input"), flags);
  const wordpiece::Params params{vocab_, unk_id_, config_.continuing_subword_prefix, config_.max_input_chars_per_word};
  for (const std::u32string& word : basic_tokenizer::split_words(normalised)) {
    wordpiece::append_ids(word, params, ids);
  }
}

std::vector<std::int32_t> BertTokenizer::sequence_ids(std::string_view text) const {
  // Validate the whole text first, so the error offset is relative to what the caller passed.
  utf8::decode(text, "BertTokenizer input");
  std::vector<std::int32_t> ids;
  std::size_t start = 0, at = 0;
  while (at < text.size()) {
    bool matched = false;
    for (const auto& [token, id] : special_) {
      if (text.compare(at, token.size(), token) == 0) {
        append_segment_ids(text.substr(start, at - start), ids);
        ids.push_back(id);
        at += token.size();
        start = at;
        matched = true;
        break;
      }
    }
    if (!matched) ++at;
  }
  append_segment_ids(text.substr(start), ids);
  return ids;
}

std::vector<std::string> BertTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> tokens;
  for (std::int32_t id : sequence_ids(text)) tokens.push_back(vocab_.token(id));
  return tokens;
}

void BertTokenizer::pad(Encoding& encoding, std::size_t length) const {
  if (encoding.size() >= length) return;
  encoding.input_ids.resize(length, pad_id_);
  encoding.attention_mask.resize(length, 0);
  encoding.token_type_ids.resize(length, 0);
}

Encoding BertTokenizer::assemble(std::vector<std::int32_t> first, std::optional<std::vector<std::int32_t>> second,
                                 const EncodeOptions& options) const {
  if (options.truncation() != Truncation::kNone) {
    truncate(first, second ? &*second : nullptr, options.truncation(), resolve_max_length(options, config_));
  }
  Encoding e;
  const std::size_t n = first.size() + (second ? second->size() + 3 : 2);
  e.input_ids.reserve(n);
  e.input_ids.push_back(cls_id_);
  e.input_ids.insert(e.input_ids.end(), first.begin(), first.end());
  e.input_ids.push_back(sep_id_);
  e.token_type_ids.assign(e.input_ids.size(), 0);
  if (second) {
    e.input_ids.insert(e.input_ids.end(), second->begin(), second->end());
    e.input_ids.push_back(sep_id_);
    e.token_type_ids.resize(e.input_ids.size(), 1);
  }
  e.attention_mask.assign(e.input_ids.size(), 1);
  if (options.padding() == Padding::kMaxLength) pad(e, resolve_max_length(options, config_));
  return e;
}

Encoding BertTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  return assemble(sequence_ids(text), std::nullopt, options);
}

Encoding BertTokenizer::encode(std::string_view first, std::string_view second, const EncodeOptions& options) const {
  return assemble(sequence_ids(first), sequence_ids(second), options);
}

std::vector<Encoding> BertTokenizer::encode_batch(const std::vector<std::string>& texts,
                                                  const EncodeOptions& options) const {
  std::vector<Encoding> out;
  out.reserve(texts.size());
  std::size_t longest = 0;
  for (const std::string& text : texts) {
    out.push_back(encode(text, options));
    longest = std::max(longest, out.back().size());
  }
  if (options.padding() == Padding::kLongest) {
    for (Encoding& e : out) pad(e, longest);
  }
  return out;
}

std::vector<Encoding> BertTokenizer::encode_batch(const std::vector<std::string>& texts,
                                                  const std::vector<std::string>& pairs,
                                                  const EncodeOptions& options) const {
  if (texts.size() != pairs.size()) {
    throw ConfigError("BertTokenizer::encode_batch: " + std::to_string(texts.size()) + " texts but " +
                      std::to_string(pairs.size()) + " pairs; pass one pair per text");
  }
  std::vector<Encoding> out;
  out.reserve(texts.size());
  std::size_t longest = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    out.push_back(encode(texts[i], pairs[i], options));
    longest = std::max(longest, out.back().size());
  }
  if (options.padding() == Padding::kLongest) {
    for (Encoding& e : out) pad(e, longest);
  }
  return out;
}

}  // namespace tenax::sdk

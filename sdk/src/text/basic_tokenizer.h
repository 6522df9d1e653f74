// BERT's basic tokenization: normalisation (HF's BertNormalizer) and the split into words
// (HF's BertPreTokenizer). Private to tenax::sdk.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tenax::sdk::basic_tokenizer {

struct Flags {
  bool clean_text;
  bool handle_chinese_chars;
  bool strip_accents;
  bool lowercase;
};

/// Canonical decomposition (NFD) with the normalisation data of Hugging Face's tokenizers.
std::u32string nfd(std::u32string_view text);

/// In HF's order: clean, pad CJK with spaces, NFD + drop Mn, lower-case.
std::u32string normalize(std::u32string_view text, const Flags& flags);

/// Words of normalised text: split on whitespace (dropped) and punctuation (kept, one
/// character a word).
std::vector<std::u32string> split_words(std::u32string_view normalised);

}  // namespace tenax::sdk::basic_tokenizer

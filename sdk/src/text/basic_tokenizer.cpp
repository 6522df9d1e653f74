#include "text/basic_tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <spdlog/fmt/fmt.h>
#include <utf8proc.h>

#include "tenax/core/error.h"
#include "text/bert_chars.h"

namespace tenax::sdk::basic_tokenizer {

// NFD as `tokenizers` does it, whose normalisation data is of another Unicode version than
// utf8proc's: a character is decomposed only when that data decomposes it, and marks are
// reordered by that data's combining classes. The mappings themselves come from utf8proc:
// Unicode never changes a character's canonical decomposition once assigned, and
// TextBertUnicodeTables.NfdOfEveryDecomposableCharacterEqualsTokenizers checks them all.
std::u32string nfd(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size() + 8);
  for (char32_t c : text) {
    if (!bert_chars::has_canonical_decomposition(c)) {
      out.push_back(c);
      continue;
    }
    utf8proc_int32_t buffer[8];  // a full canonical decomposition is at most 4 characters
    int boundclass = UTF8PROC_BOUNDCLASS_START;
    const utf8proc_ssize_t n =
        utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buffer, 8, UTF8PROC_DECOMPOSE, &boundclass);
    if (n < 0 || n > 8) {
      throw Error(
          fmt::format("utf8proc_decompose_char(U+{:04X}): {}; the tokenizer needs "
                      "utf8proc 2.8 or newer",
                      static_cast<std::uint32_t>(c), n < 0 ? utf8proc_errmsg(n) : "decomposition longer than 8"));
    }
    for (utf8proc_ssize_t k = 0; k < n; ++k) out.push_back(static_cast<char32_t>(buffer[k]));
  }
  // Canonical ordering: each run of non-starters sorted by class, equal classes keeping order.
  const auto by_class = [](char32_t a, char32_t b) {
    return bert_chars::combining_class(a) < bert_chars::combining_class(b);
  };
  for (std::size_t i = 0; i < out.size();) {
    if (bert_chars::combining_class(out[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    while (end < out.size() && bert_chars::combining_class(out[end]) != 0) ++end;
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(end),
                     by_class);
    i = end;
  }
  return out;
}

std::u32string normalize(std::u32string_view text, const Flags& flags) {
  std::u32string out;
  out.reserve(text.size() + 8);
  for (char32_t c : text) {
    if (flags.clean_text) {
      if (c == 0 || c == 0xFFFD || bert_chars::is_control(c)) continue;
      if (bert_chars::is_whitespace(c)) c = U' ';
    }
    if (flags.handle_chinese_chars && bert_chars::is_cjk(c)) {
      out.push_back(U' ');
      out.push_back(c);
      out.push_back(U' ');
    } else {
      out.push_back(c);
    }
  }
  if (flags.strip_accents) {
    std::u32string decomposed = nfd(out);
    out.clear();
    for (char32_t c : decomposed) {
      if (!bert_chars::is_nonspacing_mark(c)) out.push_back(c);
    }
  }
  if (flags.lowercase) {
    std::u32string lowered;
    lowered.reserve(out.size());
    for (char32_t c : out) bert_chars::append_lowercase(lowered, c);
    out.swap(lowered);
  }
  return out;
}

std::vector<std::u32string> split_words(std::u32string_view normalised) {
  std::vector<std::u32string> words;
  std::u32string current;
  for (char32_t c : normalised) {
    if (bert_chars::is_whitespace(c)) {
      if (!current.empty()) words.push_back(std::move(current)), current.clear();
    } else if (bert_chars::is_punctuation(c)) {
      if (!current.empty()) words.push_back(std::move(current)), current.clear();
      words.emplace_back(1, c);
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) words.push_back(std::move(current));
  return words;
}

}  // namespace tenax::sdk::basic_tokenizer

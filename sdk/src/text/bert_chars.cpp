#include "text/bert_chars.h"

#include <algorithm>

#include "text/bert_unicode_tables.h"

namespace tenax::sdk::bert_chars {
namespace tables = bert_unicode_tables;
namespace {

// The entry of a sorted, disjoint table whose range may hold `c`: the last one starting at or
// before it (nullptr when none does); the caller checks `last`.
template <typename Entry>
const Entry* at_or_before(const Entry* table, std::size_t size, char32_t c) {
  const Entry* end = table + size;
  const Entry* after = std::upper_bound(table, end, c, [](char32_t x, const Entry& e) { return x < e.first; });
  return after == table ? nullptr : after - 1;
}

bool in(const tables::Range* table, std::size_t size, char32_t c) {
  const auto* e = at_or_before(table, size, c);
  return e != nullptr && c <= e->last;
}

}  // namespace

bool is_whitespace(char32_t c) { return in(tables::kWhitespace, tables::kWhitespaceSize, c); }

bool is_control(char32_t c) { return in(tables::kControl, tables::kControlSize, c); }

bool is_punctuation(char32_t c) { return in(tables::kPunctuation, tables::kPunctuationSize, c); }

bool is_cjk(char32_t c) { return in(tables::kCjk, tables::kCjkSize, c); }

bool is_nonspacing_mark(char32_t c) { return in(tables::kNonspacingMark, tables::kNonspacingMarkSize, c); }

bool has_canonical_decomposition(char32_t c) {
  return in(tables::kCanonicalDecomposable, tables::kCanonicalDecomposableSize, c);
}

std::uint8_t combining_class(char32_t c) {
  const auto* e = at_or_before(tables::kCombiningClass, tables::kCombiningClassSize, c);
  return e != nullptr && c <= e->last ? e->value : 0;
}

void append_lowercase(std::u32string& out, char32_t c) {
  const auto* multi = std::lower_bound(tables::kLowercaseMulti, tables::kLowercaseMulti + tables::kLowercaseMultiSize,
                                       c, [](const tables::LowercaseMulti& e, char32_t x) { return e.code_point < x; });
  if (multi != tables::kLowercaseMulti + tables::kLowercaseMultiSize && multi->code_point == c) {
    for (char32_t l : multi->lower) {
      if (l != 0) out.push_back(l);
    }
    return;
  }
  const auto* run = at_or_before(tables::kLowercase, tables::kLowercaseSize, c);
  if (run != nullptr && c <= run->last && (c - run->first) % run->stride == 0) {
    out.push_back(static_cast<char32_t>(static_cast<std::int64_t>(c) + run->delta));
  } else {
    out.push_back(c);
  }
}

}  // namespace tenax::sdk::bert_chars

// The Unicode data of Hugging Face's `tokenizers` for BERT, as tables that
// tools/goldens/bert_unicode_tables.py reads out of the pinned release and writes to
// bert_unicode_tables.cpp (generated; never edit it by hand). Every table is sorted by code
// point with disjoint entries, for binary search. Private to tenax::sdk; constant data, so
// safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tenax::sdk::bert_unicode_tables {

/// The code points first..last, both included.
struct Range {
  char32_t first;
  char32_t last;
};

/// The code points first..last, each with `value` (a canonical combining class).
struct ValueRange {
  char32_t first;
  char32_t last;
  std::uint8_t value;
};

/// Every stride-th code point from first to last lower-cases to itself + delta.
struct CaseRun {
  char32_t first;
  char32_t last;
  std::uint8_t stride;
  std::int32_t delta;
};

/// A code point that lower-cases to more than one character (0-terminated when shorter).
struct LowercaseMulti {
  char32_t code_point;
  char32_t lower[3];
};

extern const Range kWhitespace[];
extern const std::size_t kWhitespaceSize;
extern const Range kControl[];
extern const std::size_t kControlSize;
extern const Range kPunctuation[];
extern const std::size_t kPunctuationSize;
extern const Range kNonspacingMark[];
extern const std::size_t kNonspacingMarkSize;
extern const Range kCjk[];
extern const std::size_t kCjkSize;
extern const Range kCanonicalDecomposable[];
extern const std::size_t kCanonicalDecomposableSize;
extern const ValueRange kCombiningClass[];
extern const std::size_t kCombiningClassSize;
extern const CaseRun kLowercase[];
extern const std::size_t kLowercaseSize;
extern const LowercaseMulti kLowercaseMulti[];
extern const std::size_t kLowercaseMultiSize;
/// FNV-1a (64-bit) of each decomposable code point, its NFD and a 0, over 32-bit little-endian
/// values in code point order: lets a test prove utf8proc's decompositions equal tokenizers'.
extern const std::uint64_t kDecompositionChecksum;

}  // namespace tenax::sdk::bert_unicode_tables

// The character classes and mappings of BERT's basic tokenizer, as Hugging Face's `tokenizers`
// (Rust) defines them, which is what BertTokenizerFast runs. The data is that library's own
// (bert_unicode_tables.h), not utf8proc's: `tokenizers` mixes Unicode versions (an old one for
// categories, another for NFD, Rust's for case and whitespace), and any newer or older table
// splits or normalises recently assigned characters differently. Private to tenax::sdk.
#pragma once

#include <cstdint>
#include <string>

namespace tenax::sdk::bert_chars {

/// Rust's char::is_whitespace (Unicode White_Space).
bool is_whitespace(char32_t c);
/// Dropped by text cleaning: Cc (but \t \n \r), Cf, Co. Unassigned code points (Cn) are kept:
/// that is what `tokenizers` 0.23 does (checked: U+0378 stays and becomes [UNK]).
bool is_control(char32_t c);
/// The ASCII symbols !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ and Unicode punctuation (P*).
bool is_punctuation(char32_t c);
/// CJK ideograph blocks that get a word of their own. The range 2B920..2CEAF (not BERT's
/// Python 2B820) is the Rust implementation's, checked against it.
bool is_cjk(char32_t c);
/// Unicode Mn, removed after NFD when stripping accents.
bool is_nonspacing_mark(char32_t c);
/// Whether NFD changes `c` (it has a canonical decomposition, Hangul syllables included).
bool has_canonical_decomposition(char32_t c);
/// The canonical combining class that NFD's reordering sorts by (0 for starters).
std::uint8_t combining_class(char32_t c);
/// Appends Rust's char::to_lowercase of `c`: one character, or more (U+0130 -> i + U+0307).
void append_lowercase(std::u32string& out, char32_t c);

}  // namespace tenax::sdk::bert_chars

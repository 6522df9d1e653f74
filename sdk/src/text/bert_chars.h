// The character classes of BERT's basic tokenizer, as Hugging Face's `tokenizers` (Rust)
// defines them, which is what BertTokenizerFast runs. Categories come from utf8proc.
// Private to tenax::sdk.
#pragma once

namespace tenax::sdk::bert_chars {

/// Unicode White_Space plus \t \n \r (Rust's char::is_whitespace).
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

}  // namespace tenax::sdk::bert_chars

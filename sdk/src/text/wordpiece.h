// WordPiece: a word becomes the greedy longest-match-first pieces of a vocabulary
// ("un", "##aff", "##able"), or the unknown token when any part has no match or the word is
// longer than max_input_chars_per_word characters. Private to tenax::sdk.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/sdk/text/vocab.h"

namespace tenax::sdk::wordpiece {

struct Params {
  const Vocab& vocab;
  std::int32_t unk_id;
  std::string_view continuing_subword_prefix;
  std::size_t max_input_chars_per_word;
};

/// Appends the ids of `word`'s pieces to `ids`.
void append_ids(std::u32string_view word, const Params& params, std::vector<std::int32_t>& ids);

}  // namespace tenax::sdk::wordpiece

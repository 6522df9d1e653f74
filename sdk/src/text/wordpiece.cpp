#include "text/wordpiece.h"

#include "text/utf8.h"

namespace tenax::sdk::wordpiece {

void append_ids(std::u32string_view word, const Params& params, std::vector<std::int32_t>& ids) {
  if (word.size() > params.max_input_chars_per_word) {
    ids.push_back(params.unk_id);
    return;
  }
  // Byte offset of every character, so that a candidate piece is a substring of the bytes.
  const std::string bytes = utf8::encode(word);
  std::vector<std::size_t> offset;
  offset.reserve(word.size() + 1);
  for (std::size_t i = 0, at = 0; i < word.size(); ++i) {
    offset.push_back(at);
    at += word[i] < 0x80 ? 1 : word[i] < 0x800 ? 2 : word[i] < 0x10000 ? 3 : 4;
  }
  offset.push_back(bytes.size());

  const std::size_t first_new = ids.size();
  std::string candidate;
  std::size_t start = 0;
  while (start < word.size()) {
    bool found = false;
    for (std::size_t end = word.size(); end > start; --end) {
      candidate.clear();
      if (start > 0) candidate.append(params.continuing_subword_prefix);
      candidate.append(bytes, offset[start], offset[end] - offset[start]);
      if (auto id = params.vocab.find(candidate)) {
        ids.push_back(*id);
        start = end;
        found = true;
        break;
      }
    }
    if (!found) {
      ids.resize(first_new);
      ids.push_back(params.unk_id);
      return;
    }
  }
}

}  // namespace tenax::sdk::wordpiece

// Dynamic padding for text batches: pads one batch to its own longest sequence (not to a
// global max_length), which is what makes short-text fine-tuning cheap.
//
// Input examples: Example::input is int64 [L] (input ids; token types all 0) or [2, L]
// (input ids, token type ids) as TokenizedTextDataset makes them; Example::label an int64
// scalar (or undefined: Batch::labels stays undefined).
// Output: Batch::input_ids, attention_mask (1 token, 0 padding) and token_type_ids, int64
// [B, longest], and Batch::labels int64 [B].
// Thread-safety: a pure function.
//
//   Collator collate = tenax::sdk::text_collator(tokenizer.pad_id());
//   Batch batch = collate(examples);
#pragma once

#include <cstdint>
#include <vector>

#include "tenax/sdk/data.h"

namespace tenax::sdk {

/// Pads `examples` with `pad_id` (token type 0, mask 0) to the longest of them. Throws
/// tenax::Error for an empty batch or an input of another shape or dtype.
Batch pad_text_batch(const std::vector<Example>& examples, std::int64_t pad_id);

/// pad_text_batch bound to `pad_id`, for Trainer's collator argument.
Collator text_collator(std::int64_t pad_id);

}  // namespace tenax::sdk

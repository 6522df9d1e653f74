// What Tenax answers for each field of transformers' TrainingArguments (and Seq2SeqTrainingArguments)
// that is not one of its own keys: a config written for Hugging Face meets a reason, never a bare
// "unknown option".
//
// A field not in for_each_field is one of:
//  - an alias: an old spelling transformers accepts (or accepted), read as the Tenax key it names
//    (`evaluation_strategy` -> `eval_strategy`), with a deprecation note as transformers gives;
//  - value-gated: accepted, with a note, when its value asks for what Tenax does anyway
//    (`push_to_hub = false`, `fp16 = false`); any other value is refused with the reason and the
//    Tenax way to get the effect. A field with no accepted value is always refused.
// The table covers the pinned transformers versions (tests/sdk/goldens/hf_training_argument_fields_*.json,
// made by tools/goldens/training_argument_fields.py); SdkHfFieldTable.* fails when a field of
// either is neither a Tenax key nor in the table, so a new transformers field cannot go unanswered.
//
// Thread-safety: the table is immutable.
#pragma once

#include <string_view>
#include <vector>

namespace tenax::sdk {

struct HfField {
  std::string_view name;      ///< transformers' field name
  std::string_view alias_of;  ///< non-empty: read as this Tenax key
  /// Values (as a TOML scalar or a command-line word: "false", "0", "", "[]", "random") that ask
  /// for what Tenax does; "*" accepts any value. Empty for an alias and for a field always refused.
  /// The parser compares a value as it reads its own: a boolean in any of its spellings, a number
  /// by value ("0" is "0.0").
  std::vector<std::string_view> accepted;
  std::string_view reason;  ///< why, and how to get the effect in Tenax (one sentence or two, no final period)
};

/// Every entry, in transformers' declaration order.
const std::vector<HfField>& hf_field_table();

/// The entry for `name`, or nullptr when the table does not know it.
const HfField* find_hf_field(std::string_view name);

}  // namespace tenax::sdk

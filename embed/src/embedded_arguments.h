// The TrainingArguments an embedded trainer (the C API's: no dataset, the caller hands every
// batch and names every checkpoint) cannot honour, and why. A key the caller set that is on this
// list is refused (TENAX_ERR_CONFIG naming the key) unless its value asks for nothing; a key
// not on it is honoured. Nothing the caller writes is silently ignored.
// Thread-safety: a pure function.
#pragma once

#include <set>
#include <string>

#include "tenax/sdk/training_arguments.h"

namespace tenax::capi {

/// Throws ConfigError for the first key of `set_keys` (ArgumentParser::set_keys) that an embedded
/// trainer cannot honour, with the reason and what to do instead.
void refuse_unembeddable_arguments(const sdk::TrainingArguments& args, const std::set<std::string>& set_keys);

}  // namespace tenax::capi

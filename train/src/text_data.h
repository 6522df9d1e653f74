// The data of a `tenax train` text job: the splits read (CSV, TSV, JSON Lines), the task decided
// (problem type, label list), every split's targets made and its texts tokenized. Errors are
// ConfigError naming the file, the row and the key.
// Thread-safety: built once on the main thread; immutable afterwards.
#pragma once

#include "job_data.h"
#include "job_options.h"
#include "tenax/sdk/text/bert_tokenizer.h"

namespace tenax::train {

JobData load_text_data(const JobOptions& options, const sdk::BertTokenizer& tokenizer);

}  // namespace tenax::train

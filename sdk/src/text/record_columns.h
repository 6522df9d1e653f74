// The columns read_text_records reads, in record order (text, the pair's second text when
// set, label), each with the TextFileOptions setter that names it, for the message when one is
// missing. Shared by the CSV/TSV/JSONL and the Parquet readers. Private to tenax::sdk.
#pragma once

#include <string>
#include <vector>

#include "tenax/sdk/text_dataset.h"

namespace tenax::sdk {

struct WantedColumn {
  std::string name;
  const char* option;  ///< "text_column", "text_pair_column" or "label_column"
};

/// text, [text pair], label: the label is always the last.
inline std::vector<WantedColumn> wanted_columns(const TextFileOptions& options) {
  std::vector<WantedColumn> wanted{{options.text_column(), "text_column"}};
  if (!options.text_pair_column().empty()) wanted.push_back({options.text_pair_column(), "text_pair_column"});
  wanted.push_back({options.label_column(), "label_column"});
  return wanted;
}

}  // namespace tenax::sdk

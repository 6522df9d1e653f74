// The Parquet branch of read_text_records (text_dataset.h), on Apache Arrow's C++ reader. This
// header names no Arrow type, so that only parquet_records.cpp compiles against Arrow.
// Private to tenax::sdk.
#pragma once

#include <vector>

#include "tenax/sdk/text_dataset.h"
#include "text/record_columns.h"

namespace tenax::sdk {

/// Appends every row of the Parquet file `out.path` to `out` (texts, text_pairs when
/// out.paired, labels; lines = 1-based row numbers). Throws ConfigError naming the file (and
/// column, Arrow type or row) for a file that cannot be opened or is not Parquet (empty,
/// truncated), a missing column, a column type text_dataset.h does not list, a null, invalid
/// UTF-8 or a float label that is not finite.
void read_parquet_records(TextRecords& out, const std::vector<WantedColumn>& wanted);

}  // namespace tenax::sdk

// RFC 4180 CSV and plain TSV parsing into rows of fields. Private to tenax::sdk.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tenax::sdk::csv {

struct Row {
  std::vector<std::string> fields;
  std::size_t line;  ///< 1-based line where the row starts
};

/// RFC 4180: comma-separated; a field in double quotes may hold commas, line breaks and ""
/// (one quote); rows end in LF or CRLF; blank lines are skipped. Throws ConfigError naming
/// `path`, line and field for an unterminated quote, text after a closing quote, or a quote
/// inside an unquoted field.
std::vector<Row> parse_csv(std::string_view data, const std::string& path);

/// Tab-separated, no quoting; rows end in LF or CRLF; blank lines are skipped.
std::vector<Row> parse_tsv(std::string_view data);

}  // namespace tenax::sdk::csv

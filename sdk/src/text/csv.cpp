#include "text/csv.h"

#include "tenax/core/error.h"

namespace tenax::sdk::csv {
namespace {

bool at_line_end(std::string_view data, std::size_t pos) {
  return pos < data.size() &&
         (data[pos] == '\n' || (data[pos] == '\r' && pos + 1 < data.size() && data[pos + 1] == '\n'));
}

std::size_t skip_line_end(std::string_view data, std::size_t pos) { return pos + (data[pos] == '\r' ? 2 : 1); }

[[noreturn]] void fail(const std::string& path, std::size_t line, std::size_t field, const std::string& why) {
  throw ConfigError(path + ":" + std::to_string(line) + ": field " + std::to_string(field) + ": " + why);
}

}  // namespace

std::vector<Row> parse_csv(std::string_view data, const std::string& path) {
  std::vector<Row> rows;
  std::size_t pos = 0, line = 1;
  while (pos < data.size()) {
    if (at_line_end(data, pos)) {  // blank line
      pos = skip_line_end(data, pos);
      ++line;
      continue;
    }
    Row row{{}, line};
    for (;;) {
      std::string field;
      const std::size_t number = row.fields.size() + 1;
      if (pos < data.size() && data[pos] == '"') {
        const std::size_t opened = line;
        ++pos;
        for (;;) {
          if (pos >= data.size()) {
            fail(path, opened, number, "the quote opened on this line is never closed");
          }
          const char c = data[pos];
          if (c == '"') {
            if (pos + 1 < data.size() && data[pos + 1] == '"') {
              field.push_back('"');
              pos += 2;
              continue;
            }
            ++pos;
            break;
          }
          if (c == '\n') ++line;
          field.push_back(c);
          ++pos;
        }
        if (pos < data.size() && data[pos] != ',' && !at_line_end(data, pos)) {
          fail(path, line, number, "text after a closing quote (inside quotes write a quote as \"\")");
        }
      } else {
        while (pos < data.size() && data[pos] != ',' && !at_line_end(data, pos)) {
          if (data[pos] == '"') {
            fail(path, line, number, "a quote inside an unquoted field (quote the whole field and double the quote)");
          }
          field.push_back(data[pos++]);
        }
      }
      row.fields.push_back(std::move(field));
      if (pos < data.size() && data[pos] == ',') {
        ++pos;
        continue;  // a trailing comma gives an empty last field
      }
      if (pos < data.size()) {
        pos = skip_line_end(data, pos);
        ++line;
      }
      break;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<Row> parse_tsv(std::string_view data) {
  std::vector<Row> rows;
  std::size_t pos = 0, line = 1;
  while (pos < data.size()) {
    std::size_t end = data.find('\n', pos);
    if (end == std::string_view::npos) end = data.size();
    std::string_view text = data.substr(pos, end - pos);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (!text.empty()) {
      Row row{{}, line};
      std::size_t start = 0;
      for (;;) {
        const std::size_t tab = text.find('\t', start);
        row.fields.emplace_back(text.substr(start, tab == std::string_view::npos ? tab : tab - start));
        if (tab == std::string_view::npos) break;
        start = tab + 1;
      }
      rows.push_back(std::move(row));
    }
    pos = end + 1;
    ++line;
  }
  return rows;
}

}  // namespace tenax::sdk::csv

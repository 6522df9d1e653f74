#include "tenax/sdk/text_dataset.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tenax/core/error.h"
#include "text/csv.h"
#include "text/parquet_records.h"
#include "text/record_columns.h"
#include "text/utf8.h"

namespace tenax::sdk {
namespace {

using nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open (check the path; run tools/fetch_assets.sh?)");
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": read error");
  std::string data = out.str();
  if (data.compare(0, 3, "\xEF\xBB\xBF") == 0) data.erase(0, 3);  // UTF-8 BOM
  return data;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TextFileFormat resolve_format(const std::string& path, TextFileFormat format) {
  if (format != TextFileFormat::kAuto) return format;
  if (ends_with(path, ".csv")) return TextFileFormat::kCsv;
  if (ends_with(path, ".tsv")) return TextFileFormat::kTsv;
  if (ends_with(path, ".jsonl") || ends_with(path, ".json")) return TextFileFormat::kJsonl;
  if (ends_with(path, ".parquet")) return TextFileFormat::kParquet;
  throw ConfigError(path +
                    ": cannot tell the format from the extension (.csv, .tsv, .jsonl, .parquet); "
                    "set TextFileOptions::format");
}

void check_utf8(const std::string& value, const std::string& path, std::size_t line, const std::string& column) {
  try {
    utf8::decode(value, "column '" + column + "'");
  } catch (const Error& e) {
    throw ConfigError(path + ":" + std::to_string(line) + ": " + e.what());
  }
}

// Appends one record; values are in wanted_columns order.
void add_record(TextRecords& out, std::vector<std::string> values, std::size_t line,
                const std::vector<WantedColumn>& wanted) {
  for (std::size_t i = 0; i < values.size(); ++i) check_utf8(values[i], out.path, line, wanted[i].name);
  out.texts.push_back(std::move(values[0]));
  if (out.paired) out.text_pairs.push_back(std::move(values[1]));
  out.labels.push_back(std::move(values.back()));
  out.lines.push_back(line);
}

void read_delimited(TextRecords& out, const std::string& data, bool tsv, const std::vector<WantedColumn>& wanted) {
  const auto rows = tsv ? csv::parse_tsv(data) : csv::parse_csv(data, out.path);
  if (rows.empty()) throw ConfigError(out.path + ": empty file (expected a header row)");
  const auto& header = rows.front().fields;
  std::vector<std::size_t> index;
  for (const WantedColumn& w : wanted) {
    std::size_t i = 0;
    while (i < header.size() && header[i] != w.name) ++i;
    if (i == header.size()) {
      std::string names;
      for (const auto& h : header) names += (names.empty() ? "" : ", ") + h;
      throw ConfigError(out.path + ":" + std::to_string(rows.front().line) + ": no column '" + w.name +
                        "' in the header (columns: " + names + "); set TextFileOptions::" + w.option);
    }
    index.push_back(i);
  }
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    if (row.fields.size() != header.size()) {
      throw ConfigError(out.path + ":" + std::to_string(row.line) + ": " + std::to_string(row.fields.size()) +
                        " fields, but the header has " + std::to_string(header.size()) +
                        (tsv ? " (a TSV field cannot hold a tab)" : " (quote fields that hold commas)"));
    }
    std::vector<std::string> values;
    for (std::size_t i : index) values.push_back(row.fields[i]);
    add_record(out, std::move(values), row.line, wanted);
  }
}

void read_jsonl(TextRecords& out, const std::string& data, const std::vector<WantedColumn>& wanted) {
  std::size_t pos = 0, line = 0;
  while (pos < data.size()) {
    std::size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    const std::string text = data.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = out.path + ":" + std::to_string(line) + ": ";
    json object;
    try {
      object = json::parse(text);
    } catch (const json::exception& e) {
      throw ConfigError(where + "not a JSON object: " + e.what());
    }
    if (!object.is_object()) throw ConfigError(where + "expected one JSON object per line");
    std::vector<std::string> values;
    for (std::size_t i = 0; i < wanted.size(); ++i) {
      const bool is_label = i + 1 == wanted.size();
      auto it = object.find(wanted[i].name);
      if (it == object.end()) {
        throw ConfigError(where + "no key '" + wanted[i].name + "'; set TextFileOptions::" + wanted[i].option);
      }
      if (it->is_string()) {
        values.push_back(it->get<std::string>());
      } else if (is_label && (it->is_number() || it->is_boolean() || it->is_array())) {
        values.push_back(it->dump());  // an array: a multi-label field (text_targets.h reads it)
      } else {
        throw ConfigError(where + "key '" + wanted[i].name + "' is " + it->type_name() +
                          (is_label ? "; a label must be a string, number, boolean or a list of labels"
                                    : "; a text must be a string"));
      }
    }
    add_record(out, std::move(values), line, wanted);
  }
}

}  // namespace

void TextRecords::truncate(std::size_t n) {
  if (n >= size()) return;
  texts.resize(n);
  labels.resize(n);
  lines.resize(n);
  if (paired) text_pairs.resize(n);
}

TextRecords read_text_records(const std::string& path, const TextFileOptions& options) {
  if (options.text_column().empty() || options.label_column().empty()) {
    throw ConfigError("TextFileOptions: text_column and label_column must name columns");
  }
  const TextFileFormat format = resolve_format(path, options.format());
  TextRecords out;
  out.path = path;
  out.paired = !options.text_pair_column().empty();
  const auto wanted = wanted_columns(options);
  if (format == TextFileFormat::kParquet) {
    read_parquet_records(out, wanted);  // Arrow reads the file itself (its footer first)
    return out;
  }
  const std::string data = read_file(path);
  if (format == TextFileFormat::kJsonl) {
    read_jsonl(out, data, wanted);
  } else {
    read_delimited(out, data, format == TextFileFormat::kTsv, wanted);
  }
  return out;
}

}  // namespace tenax::sdk

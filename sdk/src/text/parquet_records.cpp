#include "text/parquet_records.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <memory>
#include <system_error>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <nlohmann/json.hpp>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>

#include "tenax/core/error.h"
#include "text/utf8.h"

namespace tenax::sdk {
namespace {

// What every message about one column of one file starts with, and the row being read.
struct Where {
  const std::string& path;
  const WantedColumn& column;
  std::int64_t row = 0;  // 1-based

  std::string at_row() const { return path + ": row " + std::to_string(row) + ", column '" + column.name + "': "; }
};

// The Arrow types a text column may have (arrow::is_string: string, large_string); a label
// column may have these and more.
bool readable_as_text(const arrow::DataType& type) {
  if (type.id() == arrow::Type::DICTIONARY) {
    return arrow::is_string(*static_cast<const arrow::DictionaryType&>(type).value_type());
  }
  return arrow::is_string(type);
}

bool readable_as_label(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::BOOL:
    case arrow::Type::FLOAT:
    case arrow::Type::DOUBLE: return true;
    case arrow::Type::DICTIONARY: {
      const auto& values = *static_cast<const arrow::DictionaryType&>(type).value_type();
      return arrow::is_string(values) || arrow::is_integer(values);
    }
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST: {
      const auto& values = *static_cast<const arrow::BaseListType&>(type).value_type();
      return arrow::is_string(values) || arrow::is_integer(values);
    }
    default: return arrow::is_string(type) || arrow::is_integer(type);
  }
}

std::string checked_utf8(std::string value, const Where& where) {
  try {
    utf8::decode(value, "column '" + where.column.name + "'");
  } catch (const Error& e) {  // the CSV reader's words: "<file>:<line>: column 'text': invalid UTF-8 ..."
    throw ConfigError(where.path + ": row " + std::to_string(where.row) + ": " + e.what());
  }
  return value;
}

// A float label as JSON Lines gives it: the shortest text that reads back to the same value,
// with ".0" when it would otherwise read as an integer (3.0 stays a regression target, not
// class "3").
template <typename Float>
std::string float_text(Float value, const Where& where) {
  if (!std::isfinite(value)) {
    throw ConfigError(where.at_row() + "the label is " + std::to_string(value) +
                      "; a float label must be a finite number: fix or drop that row");
  }
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string integer_text(const arrow::Array& array, std::int64_t i) {
  switch (array.type_id()) {
    case arrow::Type::INT8: return std::to_string(static_cast<const arrow::Int8Array&>(array).Value(i));
    case arrow::Type::INT16: return std::to_string(static_cast<const arrow::Int16Array&>(array).Value(i));
    case arrow::Type::INT32: return std::to_string(static_cast<const arrow::Int32Array&>(array).Value(i));
    case arrow::Type::INT64: return std::to_string(static_cast<const arrow::Int64Array&>(array).Value(i));
    case arrow::Type::UINT8: return std::to_string(static_cast<const arrow::UInt8Array&>(array).Value(i));
    case arrow::Type::UINT16: return std::to_string(static_cast<const arrow::UInt16Array&>(array).Value(i));
    case arrow::Type::UINT32: return std::to_string(static_cast<const arrow::UInt32Array&>(array).Value(i));
    default:  // UINT64: readable_as_label admitted integers only
      return std::to_string(static_cast<const arrow::UInt64Array&>(array).Value(i));
  }
}

std::string value_text(const arrow::Array& array, std::int64_t i, const Where& where);

// A list cell as the JSON array JSON Lines gives (["a","b"], [0,2]), which split_multi_label
// (text_targets.h) reads.
template <typename ListArray>
std::string list_text(const ListArray& list, std::int64_t i, const Where& where) {
  const arrow::Array& values = *list.values();
  const std::int64_t begin = list.value_offset(i), end = begin + list.value_length(i);
  nlohmann::json out = nlohmann::json::array();
  for (std::int64_t j = begin; j < end; ++j) {
    if (values.IsNull(j)) {
      throw ConfigError(where.at_row() + "element " + std::to_string(j - begin + 1) +
                        " of the label list is null; drop it from the list");
    }
    std::string element = value_text(values, j, where);
    if (arrow::is_string(*values.type())) {
      out.push_back(std::move(element));
    } else {
      out.push_back(nlohmann::json::parse(element));  // an integer: a JSON number, as JSON Lines has it
    }
  }
  return out.dump();
}

// The value of a non-null cell as a string: text as it is, numbers and lists as JSON writes
// them. `array`'s type passed readable_as_text or readable_as_label.
std::string value_text(const arrow::Array& array, std::int64_t i, const Where& where) {
  switch (array.type_id()) {
    case arrow::Type::STRING: return checked_utf8(static_cast<const arrow::StringArray&>(array).GetString(i), where);
    case arrow::Type::LARGE_STRING:
      return checked_utf8(static_cast<const arrow::LargeStringArray&>(array).GetString(i), where);
    case arrow::Type::BOOL: return static_cast<const arrow::BooleanArray&>(array).Value(i) ? "true" : "false";
    case arrow::Type::FLOAT: return float_text(static_cast<const arrow::FloatArray&>(array).Value(i), where);
    case arrow::Type::DOUBLE: return float_text(static_cast<const arrow::DoubleArray&>(array).Value(i), where);
    case arrow::Type::LIST: return list_text(static_cast<const arrow::ListArray&>(array), i, where);
    case arrow::Type::LARGE_LIST: return list_text(static_cast<const arrow::LargeListArray&>(array), i, where);
    case arrow::Type::DICTIONARY: {
      const auto& dictionary = static_cast<const arrow::DictionaryArray&>(array);
      const std::int64_t index = dictionary.GetValueIndex(i);
      const arrow::Array& values = *dictionary.dictionary();
      if (index < 0 || index >= values.length()) {
        throw ConfigError(where.at_row() + "the dictionary index " + std::to_string(index) +
                          " names no value; the file is damaged: write it again");
      }
      if (values.IsNull(index))
        throw ConfigError(where.at_row() + "null; every row needs a value: fill or drop those rows");
      return value_text(values, index, where);
    }
    default: return integer_text(array, i);
  }
}

[[noreturn]] void not_parquet(const std::string& path, const arrow::Status& status) {
  throw ConfigError(path + ": not a readable Parquet file (" + status.ToString() +
                    "); check that it is Parquet and whole (not a truncated copy), or set the format if it is CSV, "
                    "TSV or JSON Lines");
}

// The field index of `column` in `schema`; throws naming the columns there when it is missing
// or ambiguous.
int field_index(const arrow::Schema& schema, const std::string& path, const WantedColumn& column) {
  const std::vector<int> found = schema.GetAllFieldIndices(column.name);
  if (found.size() == 1) return found.front();
  std::string names;
  for (const auto& field : schema.fields()) names += (names.empty() ? "" : ", ") + field->name();
  if (found.empty()) {
    throw ConfigError(path + ": no column '" + column.name + "' (columns: " + names +
                      "); set TextFileOptions::" + column.option);
  }
  throw ConfigError(path + ": " + std::to_string(found.size()) + " columns are named '" + column.name +
                    "'; write the file with distinct column names");
}

void check_type(const arrow::Field& field, const std::string& path, const WantedColumn& column, bool is_label) {
  const arrow::DataType& type = *field.type();
  if (is_label ? readable_as_label(type) : readable_as_text(type)) return;
  throw ConfigError(
      path + ": column '" + column.name + "' has Arrow type " + type.ToString() +
      (is_label ? "; a label column must be an integer, float, double, bool or string, or a list of "
                  "strings or integers (multi-label)"
                : "; a text column must be string or large_string") +
      ": cast it when writing the file (pyarrow: table.cast, pandas: df.astype) or set TextFileOptions::" +
      column.option + " to another column");
}

// Every cell of `column`, in row order, as text.
std::vector<std::string> column_values(const arrow::ChunkedArray& column, const std::string& path,
                                       const WantedColumn& wanted) {
  std::vector<std::string> values;
  values.reserve(static_cast<std::size_t>(column.length()));
  Where where{path, wanted};
  for (const auto& chunk : column.chunks()) {
    const arrow::Status valid = chunk->Validate();
    if (!valid.ok()) not_parquet(path, valid);
    for (std::int64_t i = 0; i < chunk->length(); ++i) {
      ++where.row;
      if (chunk->IsNull(i)) {
        throw ConfigError(where.at_row() + "null; every row needs a value: fill or drop those rows");
      }
      values.push_back(value_text(*chunk, i, where));
    }
  }
  return values;
}

std::vector<std::vector<std::string>> read_columns(const std::string& path, const std::vector<WantedColumn>& wanted) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes == 0) throw ConfigError(path + ": empty file (0 bytes), not Parquet; write the table again");
  auto file = arrow::io::ReadableFile::Open(path);
  if (!file.ok()) {
    throw ConfigError(path + ": cannot open (" + file.status().message() + "); check the path");
  }
  auto reader = parquet::arrow::OpenFile(*file, arrow::default_memory_pool());
  if (!reader.ok()) not_parquet(path, reader.status());
  std::shared_ptr<arrow::Schema> schema;
  if (const auto status = (*reader)->GetSchema(&schema); !status.ok()) not_parquet(path, status);

  std::vector<int> indices;
  for (std::size_t c = 0; c < wanted.size(); ++c) {
    const int index = field_index(*schema, path, wanted[c]);
    check_type(*schema->field(index), path, wanted[c], /*is_label=*/c + 1 == wanted.size());
    indices.push_back(index);
  }
  std::vector<std::vector<std::string>> columns;
  for (std::size_t c = 0; c < wanted.size(); ++c) {
    std::shared_ptr<arrow::ChunkedArray> column;
    if (const auto status = (*reader)->ReadColumn(indices[c], &column); !status.ok()) not_parquet(path, status);
    columns.push_back(column_values(*column, path, wanted[c]));
    if (columns.back().size() != columns.front().size()) {
      not_parquet(path, arrow::Status::Invalid("column '", wanted[c].name, "' has ", columns.back().size(),
                                               " rows, column '", wanted[0].name, "' ", columns.front().size()));
    }
  }
  return columns;
}

}  // namespace

void read_parquet_records(TextRecords& out, const std::vector<WantedColumn>& wanted) {
  std::vector<std::vector<std::string>> columns;
  try {
    columns = read_columns(out.path, wanted);
  } catch (const parquet::ParquetException& e) {  // the reader's parts below the Status API throw
    not_parquet(out.path, arrow::Status::IOError(e.what()));
  }
  out.texts = std::move(columns.front());
  if (out.paired) out.text_pairs = std::move(columns[1]);
  out.labels = std::move(columns.back());
  out.lines.resize(out.texts.size());
  for (std::size_t i = 0; i < out.lines.size(); ++i) out.lines[i] = i + 1;
}

}  // namespace tenax::sdk

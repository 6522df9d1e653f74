// Writing Parquet files in tests with Apache Arrow's C++ writer (the pinned pyarrow wheel's
// libparquet; link TenaxArrow::parquet): columns built from plain vectors, a table written in
// row groups of a given size, so that a reader sees several groups and chunked columns.
//
//   write_parquet(path, {{"text", strings({"a", "b", "c"})}, {"label", int64s({0, 1, 0})}}, 2);
#pragma once

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tenax::testing {

/// The value of `result`, or a test failure that says what Arrow said.
template <typename T>
T arrow_ok(arrow::Result<T> result) {
  if (!result.ok()) throw std::runtime_error("arrow: " + result.status().ToString());
  return std::move(result).ValueOrDie();
}

inline void arrow_ok(const arrow::Status& status) {
  if (!status.ok()) throw std::runtime_error("arrow: " + status.ToString());
}

/// A column of `Builder`'s type from `values`; std::nullopt is a null.
template <typename Builder, typename T>
std::shared_ptr<arrow::Array> column_of(const std::vector<std::optional<T>>& values) {
  Builder builder;
  for (const auto& v : values) arrow_ok(v ? builder.Append(*v) : builder.AppendNull());
  return arrow_ok(builder.Finish());
}

inline std::shared_ptr<arrow::Array> strings(const std::vector<std::optional<std::string>>& values) {
  return column_of<arrow::StringBuilder>(values);
}
inline std::shared_ptr<arrow::Array> large_strings(const std::vector<std::optional<std::string>>& values) {
  return column_of<arrow::LargeStringBuilder>(values);
}
inline std::shared_ptr<arrow::Array> int64s(const std::vector<std::optional<std::int64_t>>& values) {
  return column_of<arrow::Int64Builder>(values);
}
inline std::shared_ptr<arrow::Array> doubles(const std::vector<std::optional<double>>& values) {
  return column_of<arrow::DoubleBuilder>(values);
}

/// A list<string> column (multi-label names).
inline std::shared_ptr<arrow::Array> string_lists(const std::vector<std::vector<std::string>>& rows) {
  auto values = std::make_shared<arrow::StringBuilder>();
  arrow::ListBuilder builder(arrow::default_memory_pool(), values);
  for (const auto& row : rows) {
    arrow_ok(builder.Append());
    for (const auto& v : row) arrow_ok(values->Append(v));
  }
  return arrow_ok(builder.Finish());
}

/// A list<int32> column (multi-label ids).
inline std::shared_ptr<arrow::Array> int_lists(const std::vector<std::vector<std::int32_t>>& rows) {
  auto values = std::make_shared<arrow::Int32Builder>();
  arrow::ListBuilder builder(arrow::default_memory_pool(), values);
  for (const auto& row : rows) {
    arrow_ok(builder.Append());
    for (const auto v : row) arrow_ok(values->Append(v));
  }
  return arrow_ok(builder.Finish());
}

/// Writes the named columns (all of one length) to `path` as Parquet, `row_group_size` rows per
/// row group.
inline void write_parquet(const std::string& path,
                          const std::vector<std::pair<std::string, std::shared_ptr<arrow::Array>>>& columns,
                          std::int64_t row_group_size = 1024) {
  arrow::FieldVector fields;
  arrow::ArrayVector arrays;
  for (const auto& [name, array] : columns) {
    fields.push_back(arrow::field(name, array->type()));
    arrays.push_back(array);
  }
  const auto table = arrow::Table::Make(arrow::schema(fields), arrays);
  auto out = arrow_ok(arrow::io::FileOutputStream::Open(path));
  arrow_ok(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out, row_group_size));
  arrow_ok(out->Close());
}

}  // namespace tenax::testing

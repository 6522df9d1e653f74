// Labeled text for classification, read from CSV (RFC 4180), TSV, JSONL or Parquet files: one
// or two text columns and a label column, string labels mapped to ids in sorted order. No torch.
// Parquet is read with Apache Arrow's C++ library (the pinned pyarrow wheel's libparquet,
// tools/setup_arrow.sh), kept out of this header.
//
// Errors are tenax::ConfigError naming the file, the line or row (and column) and what to do: a
// missing column, a row with the wrong number of fields, an unterminated quote, invalid UTF-8,
// a Parquet column of a type that cannot be read as text or label, a null in a Parquet column,
// a file that is not Parquet (empty, truncated), a label that the label map does not know.
// Thread-safety: plain values; const calls are safe from any thread.
//
//   auto options = tenax::sdk::TextFileOptions().text_column("text").label_column("label");
//   auto train = tenax::sdk::read_text_records(".assets/data/rotten_tomatoes/train.csv", options);
//   auto labels = tenax::sdk::LabelMap::from_records(train);     // {"fresh": 0, "rotten": 1}
//   auto eval = tenax::sdk::read_text_records(".../validation.csv", options);
//   std::vector<std::int64_t> ids = labels.ids(eval);            // throws on an unseen label
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tenax::sdk {

/// kAuto picks by extension: .csv, .tsv, .jsonl / .json (one JSON object per line), .parquet.
enum class TextFileFormat { kAuto, kCsv, kTsv, kJsonl, kParquet };

/// Which columns (CSV/TSV header names, JSONL keys, Parquet columns) hold what.
class TextFileOptions {
 public:
  TextFileOptions& text_column(std::string name) {
    text_ = std::move(name);
    return *this;
  }
  /// The second text of a pair task (empty: single texts).
  TextFileOptions& text_pair_column(std::string name) {
    pair_ = std::move(name);
    return *this;
  }
  TextFileOptions& label_column(std::string name) {
    label_ = std::move(name);
    return *this;
  }
  TextFileOptions& format(TextFileFormat value) {
    format_ = value;
    return *this;
  }

  const std::string& text_column() const { return text_; }
  const std::string& text_pair_column() const { return pair_; }
  const std::string& label_column() const { return label_; }
  TextFileFormat format() const { return format_; }

 private:
  std::string text_ = "text";
  std::string pair_;
  std::string label_ = "label";
  TextFileFormat format_ = TextFileFormat::kAuto;
};

/// The records of one file, in file order. Labels stay strings here (JSONL numbers, booleans
/// and arrays — multi-label fields — are written as JSON writes them: 1, 2.5, true, ["a","b"];
/// Parquet values the same way).
struct TextRecords {
  std::string path;
  std::vector<std::string> texts;
  std::vector<std::string> text_pairs;  ///< one per record when `paired`, else empty
  std::vector<std::string> labels;
  std::vector<std::size_t> lines;  ///< 1-based line where each record starts (Parquet: row)
  bool paired = false;             ///< a text_pair_column was read
  std::size_t size() const { return texts.size(); }
  /// Keeps the first `n` records (all when n >= size()): max_train_samples and the like.
  void truncate(std::size_t n);
};

/// Reads `path`. CSV: RFC 4180 (quoted fields may hold commas, "" and line breaks; CRLF or
/// LF), a header row, blank lines skipped, a UTF-8 BOM ignored. TSV: a header row, fields
/// split on tabs, no quoting (a field cannot hold a tab or a line break). JSONL: one object per
/// line, blank lines skipped. Parquet: any number of row groups; text columns string or
/// large_string (or dictionary-encoded strings); the label column an integer, float, double,
/// bool or string, or a list of strings or integers (multi-label); no nulls. Text values must
/// be valid UTF-8.
TextRecords read_text_records(const std::string& path, const TextFileOptions& options = {});

/// String label <-> id. Ids follow sorted order — numeric order when every label is an
/// integer ("2" before "10"), byte order otherwise — so they do not depend on file order and
/// every rank and every resumed run agrees.
class LabelMap {
 public:
  /// Duplicates are merged. Throws ConfigError when `names` is empty.
  explicit LabelMap(std::vector<std::string> names);
  /// The labels that occur in `records`.
  static LabelMap from_records(const TextRecords& records);
  /// `names` in the order given (id = position): a label list from a config or a model's
  /// id2label. Throws ConfigError when it is empty or names a label twice.
  static LabelMap in_order(std::vector<std::string> names);

  std::size_t size() const { return names_.size(); }
  const std::vector<std::string>& names() const { return names_; }
  const std::string& name(std::int64_t id) const;
  /// Throws ConfigError naming the label and the known ones.
  std::int64_t id(const std::string& label) const;
  /// The id of every record's label; an unknown label throws ConfigError naming file and line.
  std::vector<std::int64_t> ids(const TextRecords& records) const;

 private:
  LabelMap() = default;
  void index();

  std::vector<std::string> names_;
  std::unordered_map<std::string, std::int64_t> ids_;
};

}  // namespace tenax::sdk

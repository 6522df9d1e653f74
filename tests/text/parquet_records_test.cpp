// read_text_records on Parquet files written here with Arrow's C++ writer: several row groups,
// string, integer, float, bool and list labels kept as the strings JSON Lines gives, a text pair,
// and every bad input (a type that is neither text nor label, a null, a missing column, an empty,
// truncated or non-Parquet file, invalid UTF-8, a mangled file) as a ConfigError naming it.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <parquet/arrow/reader.h>

#include "support/parquet_file.h"
#include "tenax/core/error.h"
#include "tenax/sdk/text_dataset.h"
#include "tenax/sdk/text_targets.h"

namespace tenax::sdk {
namespace {

namespace fs = std::filesystem;
using testing::int64s;
using testing::strings;
using testing::write_parquet;

class ParquetRecords : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tenax_parquet_records_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write_bytes(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  static std::string slurp(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  // The message of the ConfigError that reading `file` throws ("" when none).
  static std::string error_of(const std::string& file, const TextFileOptions& options = {}) {
    try {
      read_text_records(file, options);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(ParquetRecords, ReadsEveryRowGroupInOrderWithRowNumbers) {
  std::vector<std::optional<std::string>> texts;
  std::vector<std::optional<std::int64_t>> labels;
  for (int i = 0; i < 10; ++i) {
    texts.push_back("text " + std::to_string(i) + " caf\xC3\xA9");
    labels.push_back(i % 3 - 1);
  }
  const std::string file = path("groups.parquet");
  write_parquet(file, {{"id", int64s(labels)}, {"text", strings(texts)}, {"label", int64s(labels)}},
                /*row_group_size=*/3);
  auto reader = testing::arrow_ok(
      parquet::arrow::OpenFile(testing::arrow_ok(arrow::io::ReadableFile::Open(file)), arrow::default_memory_pool()));
  ASSERT_EQ(reader->num_row_groups(), 4) << "the file should have several row groups";

  const TextRecords r = read_text_records(file);
  ASSERT_EQ(r.size(), 10u);
  EXPECT_FALSE(r.paired);
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(r.texts[i], *texts[i]);
    EXPECT_EQ(r.labels[i], std::to_string(*labels[i]));
    EXPECT_EQ(r.lines[i], i + 1);
  }
  const LabelMap map = LabelMap::from_records(r);
  EXPECT_EQ(map.names(), (std::vector<std::string>{"-1", "0", "1"}));
}

// Each label type gives the string the same row of a JSON Lines file gives, so that the label
// map, the problem type and the targets come out the same.
TEST_F(ParquetRecords, LabelsAreTheStringsJsonLinesGives) {
  struct Case {
    const char* name;
    std::shared_ptr<arrow::Array> labels;
    const char* jsonl_labels[3];
    ProblemType type;
  };
  arrow::FloatBuilder floats;
  testing::arrow_ok(floats.AppendValues({0.5F, 3.0F, -1.25F}));
  arrow::BooleanBuilder bools;
  testing::arrow_ok(bools.AppendValues(std::vector<bool>{true, false, true}));
  arrow::StringDictionaryBuilder dictionary;
  for (const char* v : {"fresh", "rotten", "fresh"}) testing::arrow_ok(dictionary.Append(v));
  const std::vector<Case> cases = {
      {"string",
       strings({"fresh", "rotten", "fresh"}),
       {"\"fresh\"", "\"rotten\"", "\"fresh\""},
       ProblemType::kSingleLabelClassification},
      {"dictionary",
       testing::arrow_ok(dictionary.Finish()),
       {"\"fresh\"", "\"rotten\"", "\"fresh\""},
       ProblemType::kSingleLabelClassification},
      {"int64", int64s({1, 0, 2}), {"1", "0", "2"}, ProblemType::kSingleLabelClassification},
      {"double", testing::doubles({2.5, 3.0, 1e-7}), {"2.5", "3.0", "1e-07"}, ProblemType::kRegression},
      {"float", testing::arrow_ok(floats.Finish()), {"0.5", "3.0", "-1.25"}, ProblemType::kRegression},
      {"bool", testing::arrow_ok(bools.Finish()), {"true", "false", "true"}, ProblemType::kSingleLabelClassification},
      {"list<string>",
       testing::string_lists({{"a", "b"}, {}, {"c"}}),
       {"[\"a\",\"b\"]", "[]", "[\"c\"]"},
       ProblemType::kMultiLabelClassification},
      {"list<int32>",
       testing::int_lists({{0, 2}, {1}, {}}),
       {"[0,2]", "[1]", "[]"},
       ProblemType::kMultiLabelClassification},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string parquet = path("labels.parquet");
    write_parquet(parquet, {{"text", strings({"a", "b", "c"})}, {"label", c.labels}}, /*row_group_size=*/2);
    std::string jsonl;
    for (int i = 0; i < 3; ++i) jsonl += "{\"text\": \"x\", \"label\": " + std::string(c.jsonl_labels[i]) + "}\n";
    const TextRecords from_parquet = read_text_records(parquet);
    const TextRecords from_jsonl = read_text_records(write_bytes("labels.jsonl", jsonl));
    EXPECT_EQ(from_parquet.labels, from_jsonl.labels);
    EXPECT_EQ(infer_problem_type(from_parquet, ""), c.type);
    if (c.type == ProblemType::kMultiLabelClassification) {
      EXPECT_EQ(split_multi_label(from_parquet.labels[0], "").size(), 2u);  // ["a","b"], [0,2]
    }
  }
}

TEST_F(ParquetRecords, ReadsTextPairsFromLargeStringsAndTheFormatOption) {
  const std::string file = path("pairs.data");  // no .parquet: TextFileOptions::format says
  write_parquet(file, {{"label", strings({"entailment", "contradiction"})},
                       {"premise", strings({"A man sleeps.", "It rains."})},
                       {"hypothesis", testing::large_strings({"Someone rests.", "It is dry."})}});
  const auto options =
      TextFileOptions().text_column("premise").text_pair_column("hypothesis").format(TextFileFormat::kParquet);
  const TextRecords r = read_text_records(file, options);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r.paired);
  EXPECT_EQ(r.texts, (std::vector<std::string>{"A man sleeps.", "It rains."}));
  EXPECT_EQ(r.text_pairs, (std::vector<std::string>{"Someone rests.", "It is dry."}));
  EXPECT_EQ(r.labels, (std::vector<std::string>{"entailment", "contradiction"}));
  EXPECT_NE(error_of(file).find("set TextFileOptions::format"), std::string::npos);

  TextRecords head = r;
  head.truncate(1);
  EXPECT_EQ(head.size(), 1u);
  EXPECT_EQ(head.text_pairs.size(), 1u);
  EXPECT_EQ(head.lines, (std::vector<std::size_t>{1}));
}

TEST_F(ParquetRecords, ATypeThatIsNeitherTextNorLabelNamesFileColumnAndType) {
  arrow::TimestampBuilder timestamps(arrow::timestamp(arrow::TimeUnit::MILLI), arrow::default_memory_pool());
  testing::arrow_ok(timestamps.AppendValues({1, 2}));
  const std::string stamp = path("stamp.parquet");
  write_parquet(stamp, {{"text", strings({"a", "b"})}, {"label", testing::arrow_ok(timestamps.Finish())}});
  const std::string e1 = error_of(stamp);
  EXPECT_NE(e1.find(stamp + ": column 'label' has Arrow type timestamp[ms]"), std::string::npos) << e1;
  EXPECT_NE(e1.find("a label column must be an integer, float, double, bool or string"), std::string::npos) << e1;
  EXPECT_NE(e1.find("cast it"), std::string::npos) << e1;

  const std::shared_ptr<arrow::Array> point = testing::arrow_ok(
      arrow::StructArray::Make(arrow::ArrayVector{int64s({1, 2}), int64s({3, 4})}, std::vector<std::string>{"x", "y"}));
  const std::string nested = path("struct.parquet");
  write_parquet(nested, {{"text", strings({"a", "b"})}, {"label", point}});
  const std::string e2 = error_of(nested);
  EXPECT_NE(e2.find("column 'label' has Arrow type struct<x: int64, y: int64>"), std::string::npos) << e2;

  arrow::BinaryBuilder binary;
  testing::arrow_ok(binary.AppendValues({"a", "b"}));
  const std::string bytes = path("binary.parquet");
  write_parquet(bytes, {{"text", testing::arrow_ok(binary.Finish())}, {"label", int64s({0, 1})}});
  const std::string e3 = error_of(bytes);
  EXPECT_NE(e3.find(bytes + ": column 'text' has Arrow type binary; a text column must be string or large_string"),
            std::string::npos)
      << e3;
  EXPECT_NE(e3.find("TextFileOptions::text_column"), std::string::npos) << e3;

  const std::string numbers = path("numbers.parquet");
  write_parquet(numbers, {{"text", int64s({1, 2})}, {"label", int64s({0, 1})}});
  EXPECT_NE(error_of(numbers).find("column 'text' has Arrow type int64"), std::string::npos);
}

TEST_F(ParquetRecords, NullsNameFileColumnAndRow) {
  const std::string labels = path("null_label.parquet");
  write_parquet(labels, {{"text", strings({"a", "b", "c", "d"})}, {"label", int64s({0, 1, std::nullopt, 1})}},
                /*row_group_size=*/2);
  const std::string e1 = error_of(labels);
  EXPECT_NE(e1.find(labels + ": row 3, column 'label': null"), std::string::npos) << e1;

  const std::string texts = path("null_text.parquet");
  write_parquet(texts, {{"text", strings({std::nullopt, "b"})}, {"label", int64s({0, 1})}});
  EXPECT_NE(error_of(texts).find(texts + ": row 1, column 'text': null"), std::string::npos);

  const std::string nan = path("nan.parquet");
  write_parquet(nan, {{"text", strings({"a", "b"})}, {"label", testing::doubles({1.5, std::nan("")})}});
  const std::string e3 = error_of(nan);
  EXPECT_NE(e3.find(nan + ": row 2, column 'label': the label is nan"), std::string::npos) << e3;
}

TEST_F(ParquetRecords, AMissingColumnIsNamedWithTheColumnsPresent) {
  const std::string file = path("columns.parquet");
  write_parquet(file, {{"sentence", strings({"a"})}, {"label", int64s({0})}});
  const std::string e = error_of(file);
  EXPECT_NE(e.find(file + ": no column 'text' (columns: sentence, label); set TextFileOptions::text_column"),
            std::string::npos)
      << e;
  const std::string pair = error_of(file, TextFileOptions().text_column("sentence").text_pair_column("other"));
  EXPECT_NE(pair.find("no column 'other'"), std::string::npos) << pair;
  EXPECT_NE(pair.find("text_pair_column"), std::string::npos) << pair;
}

TEST_F(ParquetRecords, EmptyTruncatedAndNonParquetFilesNameTheFile) {
  const std::string empty = write_bytes("empty.parquet", "");
  const std::string e1 = error_of(empty);
  EXPECT_NE(e1.find(empty + ": empty file"), std::string::npos) << e1;

  const std::string whole = path("whole.parquet");
  write_parquet(whole, {{"text", strings({"some text", "more text"})}, {"label", int64s({0, 1})}});
  const std::string bytes = slurp(whole);
  for (const std::size_t keep : {std::size_t{4}, bytes.size() / 2, bytes.size() - 1}) {
    const std::string cut = write_bytes("cut.parquet", bytes.substr(0, keep));
    const std::string e = error_of(cut);
    EXPECT_NE(e.find(cut + ": not a readable Parquet file"), std::string::npos) << keep << ": " << e;
  }

  const std::string csv = write_bytes("csv.parquet", "text,label\na,1\n");
  const std::string e3 = error_of(csv);
  EXPECT_NE(e3.find(csv + ": not a readable Parquet file"), std::string::npos) << e3;
  EXPECT_NE(error_of(path("absent.parquet")).find("absent.parquet: cannot open"), std::string::npos);

  // A schema without rows reads as no records (the CSV reader's header-only file).
  const std::string rows = path("no_rows.parquet");
  write_parquet(rows, {{"text", strings({})}, {"label", int64s({})}});
  EXPECT_EQ(read_text_records(rows).size(), 0u);
}

TEST_F(ParquetRecords, InvalidUtf8NamesRowAndColumn) {
  const std::string file = path("utf8.parquet");
  write_parquet(file, {{"text", strings({"ok", "bad \xC3("})}, {"label", strings({"a", "b"})}});
  const std::string e = error_of(file);
  EXPECT_NE(e.find(file + ": row 2: column 'text': invalid UTF-8 at byte 5"), std::string::npos) << e;
}

// Random bytes spliced into a valid file: a ConfigError or records, never a crash or another
// exception (run under ASan in build-asan).
TEST_F(ParquetRecords, MangledFilesFailCleanly) {
  const std::string whole = path("valid.parquet");
  std::vector<std::vector<std::string>> tags;
  std::vector<std::optional<std::string>> texts;
  for (int i = 0; i < 40; ++i) {
    texts.push_back("row " + std::to_string(i));
    tags.push_back(i % 2 ? std::vector<std::string>{"x", "y"} : std::vector<std::string>{"z"});
  }
  write_parquet(whole, {{"text", strings(texts)}, {"label", testing::string_lists(tags)}}, /*row_group_size=*/16);
  const std::string valid = slurp(whole);
  std::mt19937_64 rng(11);
  std::size_t rejected = 0;
  for (int round = 0; round < 300; ++round) {
    std::string data = valid;
    for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) {
      data[rng() % data.size()] = static_cast<char>(rng());
    }
    try {
      const TextRecords r = read_text_records(write_bytes("m.parquet", data));
      ASSERT_EQ(r.labels.size(), r.size());
      ASSERT_EQ(r.lines.size(), r.size());
    } catch (const ConfigError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 30u);
}

}  // namespace
}  // namespace tenax::sdk

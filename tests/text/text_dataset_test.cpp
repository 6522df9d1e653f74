// Readers for CSV, TSV and JSONL text classification files, label maps, and the fetched
// Rotten Tomatoes splits.
#include "tenax/sdk/text_dataset.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "tenax/core/error.h"
#include "text/text_test_support.h"

namespace tenax::sdk {
namespace {

namespace fs = std::filesystem;

class TextDatasetFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tenax_text_dataset_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& content) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
  }
  // The message of the ConfigError that reading `path` throws ("" when none).
  static std::string error_of(const std::string& path, const TextFileOptions& options = {}) {
    try {
      read_text_records(path, options);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(TextDatasetFiles, CsvFollowsRfc4180) {
  const std::string path = write("a.csv",
                                 "\xEF\xBB\xBFid,text,label\r\n"
                                 "1,\"Funny, sharp and \"\"true\"\"\",fresh\r\n"
                                 "\r\n"
                                 "2,\"two\nlines\",rotten\n"
                                 "3,plain,fresh\n"
                                 "4,\"\",rotten");  // no final line break, empty text
  const TextRecords r = read_text_records(path);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r.texts[0], "Funny, sharp and \"true\"");
  EXPECT_EQ(r.texts[1], "two\nlines");
  EXPECT_EQ(r.texts[3], "");
  EXPECT_EQ(r.labels, (std::vector<std::string>{"fresh", "rotten", "fresh", "rotten"}));
  EXPECT_EQ(r.lines, (std::vector<std::size_t>{2, 4, 6, 7}));
  EXPECT_FALSE(r.paired);
}

TEST_F(TextDatasetFiles, CsvErrorsNameFileLineAndTheRemedy) {
  const std::string missing = error_of(write("m.csv", "sentence,label\nx,1\n"));
  EXPECT_NE(missing.find("m.csv:1: no column 'text'"), std::string::npos) << missing;
  EXPECT_NE(missing.find("columns: sentence, label"), std::string::npos) << missing;
  EXPECT_NE(missing.find("text_column"), std::string::npos) << missing;

  const std::string fields = error_of(write("f.csv", "text,label\na,1\nb,c,1\n"));
  EXPECT_NE(fields.find("f.csv:3: 3 fields, but the header has 2"), std::string::npos) << fields;

  const std::string open = error_of(write("q.csv", "text,label\na,1\n\"never closed,1\nb,0\n"));
  EXPECT_NE(open.find("q.csv:3: field 1: the quote opened on this line is never closed"), std::string::npos) << open;

  const std::string stray = error_of(write("s.csv", "text,label\nsay \"hi\",1\n"));
  EXPECT_NE(stray.find("s.csv:2: field 1: a quote inside an unquoted field"), std::string::npos) << stray;

  const std::string after = error_of(write("t.csv", "text,label\n\"a\"b,1\n"));
  EXPECT_NE(after.find("t.csv:2: field 1: text after a closing quote"), std::string::npos) << after;

  const std::string utf8 = error_of(write("u.csv", "text,label\nok,1\nbad \xC3(,1\n"));
  EXPECT_NE(utf8.find("u.csv:3: column 'text': invalid UTF-8 at byte 5"), std::string::npos) << utf8;

  EXPECT_NE(error_of(write("e.csv", "")).find("empty file"), std::string::npos);
  EXPECT_NE(error_of((dir_ / "absent.csv").string()).find("cannot open"), std::string::npos);
  EXPECT_NE(error_of(write("x.txt", "text,label\n")).find("set TextFileOptions::format"), std::string::npos);
}

TEST_F(TextDatasetFiles, TsvWithPairs) {
  const std::string path = write("p.tsv",
                                 "label\tsentence1\tsentence2\r\n"
                                 "entailment\tA man sleeps.\tSomeone rests.\r\n"
                                 "contradiction\tIt rains.\tIt is dry.\r\n");
  const auto options = TextFileOptions().text_column("sentence1").text_pair_column("sentence2");
  const TextRecords r = read_text_records(path, options);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r.paired);
  EXPECT_EQ(r.texts[1], "It rains.");
  EXPECT_EQ(r.text_pairs[0], "Someone rests.");
  EXPECT_EQ(r.labels[1], "contradiction");
  const std::string tabs = error_of(write("bad.tsv", "text\tlabel\na\tb\t1\n"));
  EXPECT_NE(tabs.find("bad.tsv:2: 3 fields"), std::string::npos) << tabs;
}

TEST_F(TextDatasetFiles, JsonlLabelsMayBeNumbers) {
  const std::string path = write("j.jsonl",
                                 "{\"text\": \"good\", \"label\": 1}\n\n"
                                 "{\"text\": \"bad\", \"label\": 0, \"extra\": [1]}\n");
  const TextRecords r = read_text_records(path);
  EXPECT_EQ(r.labels, (std::vector<std::string>{"1", "0"}));
  EXPECT_EQ(r.lines, (std::vector<std::size_t>{1, 3}));
  const std::string number_text = error_of(write("n.jsonl", "{\"text\": 5, \"label\": 1}\n"));
  EXPECT_NE(number_text.find("n.jsonl:1: key 'text' is number; a text must be a string"), std::string::npos)
      << number_text;
  const std::string broken = error_of(write("b.jsonl", "{\"text\": \"a\", \"label\": 1}\n{oops\n"));
  EXPECT_NE(broken.find("b.jsonl:2: not a JSON object"), std::string::npos) << broken;
  const std::string key = error_of(write("k.jsonl", "{\"text\": \"a\"}\n"));
  EXPECT_NE(key.find("k.jsonl:1: no key 'label'"), std::string::npos) << key;
}

TEST_F(TextDatasetFiles, LabelIdsFollowSortedOrder) {
  const TextRecords r = read_text_records(write("l.csv", "text,label\na,rotten\nb,fresh\nc,rotten\n"));
  const LabelMap labels = LabelMap::from_records(r);
  EXPECT_EQ(labels.names(), (std::vector<std::string>{"fresh", "rotten"}));
  EXPECT_EQ(labels.ids(r), (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_EQ(LabelMap({"10", "2", "-1", "2"}).names(), (std::vector<std::string>{"-1", "2", "10"}));
  const TextRecords other = read_text_records(write("o.csv", "text,label\na,fresh\nb,spoiled\n"));
  try {
    labels.ids(other);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("o.csv:3: label 'spoiled' is not one of the 2 known"), std::string::npos)
        << e.what();
  }
}

// Mangled files (random bytes spliced into a valid one): a ConfigError or records, never a
// crash or another exception (run under ASan in build-asan).
TEST_F(TextDatasetFiles, MangledFilesFailCleanly) {
  const std::string valid[] = {"text,label\n\"a, \"\"b\"\"\",1\nplain,0\n\"multi\nline\",1\n",
                               "text\tlabel\na\t1\nb\t0\n",
                               "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\", \"label\": \"x\"}\n"};
  const char* names[] = {"m.csv", "m.tsv", "m.jsonl"};
  std::mt19937_64 rng(7);
  const std::string alphabet = "\",\t\n\r{}:[]\\ab\xC3\xA9\xFF\x80";
  std::size_t rejected = 0, read = 0;
  for (int round = 0; round < 600; ++round) {
    const std::size_t which = static_cast<std::size_t>(round) % 3;
    std::string data = valid[which];
    for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) {
      const std::size_t at = rng() % (data.size() + 1);
      const char c = rng() % 2 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng());
      if (rng() % 3 == 0 && at < data.size())
        data.erase(at, 1);
      else
        data.insert(at, 1, c);
    }
    try {
      const TextRecords r = read_text_records(write(names[which], data));
      ASSERT_EQ(r.labels.size(), r.size());
      ++read;
    } catch (const ConfigError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 50u);
  EXPECT_GT(read, 50u);
}

// The fetched data set: the split sizes of docs/trainer.md ("Data"), two labels, and no text shared between
// splits (the test split is held out).
TEST(TextRottenTomatoes, SplitsAreDisjointAndLabeled) {
  const std::string dir = test::asset("data/rotten_tomatoes");
  const auto train = read_text_records(dir + "/train.csv");
  const auto validation = read_text_records(dir + "/validation.csv");
  const auto test_split = read_text_records(dir + "/test.csv");
  EXPECT_EQ(train.size(), 10239u);
  EXPECT_EQ(validation.size(), 1230u);
  EXPECT_EQ(test_split.size(), 1283u);
  const LabelMap labels = LabelMap::from_records(train);
  EXPECT_EQ(labels.names(), (std::vector<std::string>{"fresh", "rotten"}));
  EXPECT_NO_THROW(labels.ids(validation));
  EXPECT_NO_THROW(labels.ids(test_split));
  std::set<std::string> seen(train.texts.begin(), train.texts.end());
  EXPECT_EQ(seen.size(), train.size());
  for (const auto* split : {&validation, &test_split}) {
    for (const auto& t : split->texts) EXPECT_TRUE(seen.insert(t).second) << "leaked: " << t;
  }
}

}  // namespace
}  // namespace tenax::sdk

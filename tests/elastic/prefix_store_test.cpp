#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tenax/core/error.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {
namespace {

using std::chrono::milliseconds;

std::vector<char> bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

TEST(ElasticPrefixStore, GenerationPrefixIsGenSlashNSlash) {
  EXPECT_EQ(generation_prefix(0), "gen/0/");
  EXPECT_EQ(generation_prefix(42), "gen/42/");
}

TEST(ElasticPrefixStore, GenerationsDoNotSeeEachOthersKeys) {
  InMemoryStore base;
  PrefixStore gen1(generation_prefix(1), base);
  PrefixStore gen2(generation_prefix(2), base);
  gen1.set("rank/0", bytes("old"));
  EXPECT_EQ(base.get("gen/1/rank/0", milliseconds(5)), bytes("old"));
  try {
    gen2.get("rank/0", milliseconds(20));
    FAIL() << "generation 2 must not read generation 1's key";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'gen/2/rank/0'"), std::string::npos) << e.what();
  }
  gen2.set("rank/0", bytes("new"));
  EXPECT_EQ(gen1.get("rank/0", milliseconds(5)), bytes("old"));
  EXPECT_EQ(gen2.get("rank/0", milliseconds(5)), bytes("new"));
}

TEST(ElasticPrefixStore, AddAndWaitArePrefixed) {
  InMemoryStore base;
  PrefixStore gen(generation_prefix(7), base);
  EXPECT_EQ(gen.add("joined", 1), 1);
  EXPECT_EQ(gen.add("joined", 1), 2);
  EXPECT_EQ(base.add("gen/7/joined", 0), 2);
  EXPECT_EQ(base.add("joined", 0), 0);
  gen.wait({"joined"}, milliseconds(5));
  EXPECT_THROW(gen.wait({"joined", "other"}, milliseconds(5)), TimeoutError);
}

}  // namespace
}  // namespace tenax::elastic

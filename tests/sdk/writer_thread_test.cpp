#include "writer_thread.h"

#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tenax::sdk::detail {
namespace {

TEST(SdkWriterThread, EverySaveRunsOnTheSameThreadThatIsNotTheCallers) {
  std::vector<std::thread::id> ran_on;
  WriterThread writer;
  for (int i = 0; i < 3; ++i) {
    std::promise<void> done;
    writer.post([&] {
      ran_on.push_back(std::this_thread::get_id());
      done.set_value();
    });
    done.get_future().wait();  // as the Checkpointer: the next task only after this one ended
  }
  ASSERT_EQ(ran_on.size(), 3u);
  EXPECT_NE(ran_on[0], std::this_thread::get_id());
  EXPECT_EQ(ran_on[1], ran_on[0]);
  EXPECT_EQ(ran_on[2], ran_on[0]);
}

// A Checkpointer destroyed right after save_async still writes (or cancels) that save: the
// destructor runs a task it was given before it stops.
TEST(SdkWriterThread, TheDestructorRunsAPostedTaskBeforeItStops) {
  bool ran = false;
  {
    WriterThread writer;
    writer.post([&] { ran = true; });
  }
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace tenax::sdk::detail

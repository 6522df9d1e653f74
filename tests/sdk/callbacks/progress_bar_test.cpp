// ProgressBarCallback's output in both displays, with a fake clock so that samples/s and the
// ETA are exact.
#include "tenax/sdk/callbacks/progress_bar.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "sdk/callbacks/callback_test_support.h"

namespace tenax::sdk {
namespace {

using testing::state_at;

// A clock the test moves by hand.
struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  ProgressBarCallback::Clock fn() {
    return [this] { return now; };
  }
  void advance(double seconds) {
    now += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  }
};

// Ten steps of a second each, batch 4; logs at steps 2 and 4, an evaluation at step 4.
void run(ProgressBarCallback& cb, FakeClock& clock, int rank = 0) {
  TrainingArguments args;
  TrainerControl control;
  TrainerState state = state_at(0, 10, rank);
  cb.on_train_begin(args, state, control);
  for (int step = 1; step <= 4; ++step) {
    clock.advance(1.0);
    state = state_at(step, 10, rank);
    cb.on_step_end(args, state, control);
    if (step % 2 == 0) {
      cb.on_log(args, state, control,
                Logs{{"loss", 1.0 / step},
                     {"learning_rate", 1e-4 * step},
                     {"epoch", state.epoch},
                     {"step", static_cast<double>(step)},
                     {"samples_per_second", 4.0}});
    }
  }
  cb.on_log(args, state, control, Logs{{"eval_loss", 0.25}, {"eval_accuracy", 0.75}, {"epoch", 0.4}, {"step", 4.0}});
  cb.on_train_end(args, state, control);
}

TEST(SdkProgressBar, NotATerminalPrintsOnePlainLinePerLog) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBarCallback cb(out, ProgressBarCallback::Display::kLinePerLog, clock.fn());
  run(cb, clock);
  EXPECT_EQ(out.str(),
            "step 2/10 (20%) | loss 0.5000 | lr 2.000e-04 | 4.0 samples/s | ETA 0:08\n"
            "step 4/10 (40%) | loss 0.2500 | lr 4.000e-04 | 4.0 samples/s | ETA 0:06\n"
            "step 4 | eval_accuracy 0.7500 | eval_loss 0.2500\n");
}

TEST(SdkProgressBar, TerminalRedrawsOneLineInPlaceAndEndsWithANewline) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBarCallback cb(out, ProgressBarCallback::Display::kRedrawInPlace, clock.fn());
  run(cb, clock);
  const std::string text = out.str();
  const std::string clear = "\r\x1b[K";
  // Drawn at train begin, after each of 4 steps, at each of 2 training logs, once more after
  // the evaluation line (which clears the bar first) and at the end.
  std::size_t redraws = 0;
  for (std::size_t at = text.find(clear); at != std::string::npos; at = text.find(clear, at + 1)) ++redraws;
  EXPECT_EQ(redraws, 1u + 4u + 2u + 2u + 1u);
  // Only the evaluation line and the end of training move to a new line.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_NE(text.find(clear + "[########............] step 4/10 (40%) | loss 0.2500 | lr 4.000e-04 | 4.0 samples/s | "
                              "ETA 0:06"),
            std::string::npos);
  EXPECT_NE(text.find(clear + "step 4 | eval_accuracy 0.7500 | eval_loss 0.2500\n" + clear + "[########"),
            std::string::npos);
  EXPECT_EQ(text.rfind('\n'), text.size() - 1);
  // The first draw comes before any step: no loss, no rate, no ETA yet.
  EXPECT_EQ(text.substr(0, text.find(clear, 1)), clear + "[....................] step 0/10 (0%)");
}

TEST(SdkProgressBar, OtherRanksPrintNothing) {
  for (auto display : {ProgressBarCallback::Display::kLinePerLog, ProgressBarCallback::Display::kRedrawInPlace}) {
    std::ostringstream out;
    FakeClock clock;
    ProgressBarCallback cb(out, display, clock.fn());
    run(cb, clock, /*rank=*/1);
    EXPECT_EQ(out.str(), "");
  }
}

TEST(SdkProgressBar, ResumedRunMeasuresRateFromItsOwnFirstStep) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBarCallback cb(out, ProgressBarCallback::Display::kLinePerLog, clock.fn());
  TrainingArguments args;
  TrainerControl control;
  TrainerState state = state_at(6, 10);
  cb.on_train_begin(args, state, control);
  clock.advance(2.0);
  state = state_at(8, 10);
  cb.on_log(args, state, control, Logs{{"loss", 0.125}, {"learning_rate", 5e-5}});
  // 2 steps x 4 samples in 2 s; 2 steps left at 1 s each.
  EXPECT_EQ(out.str(), "step 8/10 (80%) | loss 0.1250 | lr 5.000e-05 | 4.0 samples/s | ETA 0:02\n");
}

}  // namespace
}  // namespace tenax::sdk

#include "writer_thread.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "tenax/core/error.h"
#include "tenax/core/logging.h"

namespace tenax::sdk::detail {

WriterThread::~WriterThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void WriterThread::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (task_) throw Error("WriterThread::post: the previous task has not started");
    task_ = std::move(task);
  }
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { loop(); });
  } else {
    wake_.notify_one();
  }
}

void WriterThread::loop() {
  // A lower CPU priority for this thread only (Linux: nice is per thread). At nice 0 the
  // writer's hashing and page-cache copying took a core from every OpenMP region of a
  // CPU-bound step: +50 % step time during a BERT-base save on 2 cores; at nice 10 +3.5 %
  // (bench/checkpoint_bench.cpp). Nice 19 removed even that but starved the writer so long
  // that a commit due in milliseconds was still pending ten steps later: more work lost at
  // a crash (tests/integration/kill_resume_test.cpp caught it).
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10) != 0) {
    logger("tenax.checkpoint")->debug("could not lower the writer thread's priority: {}", std::strerror(errno));
  }
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || task_; });
      if (!task_) return;  // stopping, nothing left to run
      task = std::exchange(task_, nullptr);
    }
    task();
  }
}

}  // namespace tenax::sdk::detail

#include "tenax/sdk/checkpointer.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <optional>
#include <utility>

#include <torch/torch.h>
#ifdef TENAX_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "commit_protocol.h"
#include "writer_thread.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/core/trace_point.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/peer_wait.h"
#include "tensor_conversion.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"
#include "tenax/storage/write_plan.h"

namespace tenax::sdk {
namespace {

using Clock = std::chrono::steady_clock;

// null (what `{}` gives at a call site) becomes an empty object; anything else but an object
// is a caller error.
nlohmann::json as_object(const nlohmann::json& value, const char* what) {
  if (value.is_null()) return nlohmann::json::object();
  if (!value.is_object()) {
    throw ConfigError(std::string("Checkpointer::save: ") + what + " must be a JSON object, got " + value.type_name());
  }
  return value;
}

// A host copy that the training thread may not touch any more: the writer reads it while
// training goes on (the optimizer updates parameters in place). `reuse`, when it has the same
// shape and dtype, is the buffer of the same tensor in the previous save: copying into memory
// that is already mapped avoids the page faults of a fresh allocation, which cost more than
// the copy itself (measured: bench/checkpoint_bench.cpp, async stall).
// A device tensor goes into pinned host memory with an asynchronous copy: the training thread
// only queues it (the optimizer's update comes after it on the same stream); the writer waits
// for the job's CUDA event before it reads.
torch::Tensor snapshot_copy(const torch::Tensor& t, const torch::Tensor* reuse) {
  torch::Tensor d = t.detach();
  const bool from_device = d.is_cuda();
  if (reuse != nullptr && reuse->sizes().equals(d.sizes()) && reuse->scalar_type() == d.scalar_type() &&
      reuse->is_contiguous() && (!from_device || reuse->is_pinned())) {
    torch::Tensor staged = *reuse;
    staged.copy_(d, /*non_blocking=*/from_device);
    return staged;
  }
  if (from_device) {
    torch::Tensor staged = torch::empty(d.sizes(), d.options().device(torch::kCPU).pinned_memory(true));
    staged.copy_(d, /*non_blocking=*/true);
    return staged;
  }
  return d.is_cpu() ? d.clone(at::MemoryFormat::Contiguous) : d.to(torch::kCPU).contiguous();
}

// The context's fence, unless the options name one.
CheckpointerOptions with_context_fence(CheckpointerOptions options, const elastic::WorkerContext& context) {
  if (options.fence_dir.empty() && context.fence() != nullptr) options.fence_dir = context.fence()->dir();
  return options;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

// One save in flight: the snapshot it owns, the plan for the writer, and how it ended.
struct Checkpointer::Job {
  NamedTensors keep_alive;   // backs plan.tensors; reused by the next save when owned
  bool owns_buffers = true;  // false: keep_alive holds the caller's own tensors
  // Copies the writer makes before it writes (replicated_copied_late): source → staged buffer.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> late_copies;
  std::promise<void> copied;
  std::shared_future<void> copied_future = copied.get_future().share();
  detail::CommitPlan plan;
  std::atomic<bool> cancelled{false};
  double snapshot_seconds = 0.0;
#ifdef TENAX_CUDA
  // Recorded after the device-to-host copies were queued; the writer waits on it.
  std::optional<at::cuda::CUDAEvent> device_copies;
#endif
  std::promise<SaveResult> result;
  std::future<SaveResult> future = result.get_future();
};

SaveResult::SaveResult(std::int64_t step, SaveOutcome outcome, std::string error, std::filesystem::path dir)
    : step(step),
      outcome(outcome),
      dir(std::move(dir)),
      error(std::move(error)),
      committed(outcome == SaveOutcome::kCommitted),
      fenced(outcome == SaveOutcome::kFenced),
      superseded(outcome == SaveOutcome::kSuperseded) {}

torch::Tensor LoadedCheckpoint::get(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? torch::Tensor() : it->second;
}

Checkpointer::Checkpointer(const std::filesystem::path& output_dir, const elastic::WorkerContext& context,
                           CheckpointerOptions options)
    : Checkpointer(output_dir, context.rank(), context.world_size(), context.generation(), context.open_store(),
                   with_context_fence(std::move(options), context)) {}

Checkpointer::Checkpointer(const std::filesystem::path& output_dir, int rank, int world_size, std::int64_t generation,
                           std::unique_ptr<elastic::Store> store, CheckpointerOptions options)
    : root_(output_dir / "checkpoints"),
      rank_(rank),
      world_size_(world_size),
      generation_(generation),
      store_(std::move(store)),
      options_(std::move(options)) {
  if (!store_) throw ConfigError("Checkpointer: a store is needed to coordinate the commit");
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_) {
    throw ConfigError("Checkpointer: rank " + std::to_string(rank_) + " is not in a world of " +
                      std::to_string(world_size_));
  }
  if (options_.save_total_limit < 0) {
    throw ConfigError("save_total_limit must be >= 0 (0 keeps every checkpoint), got " +
                      std::to_string(options_.save_total_limit));
  }
  // Leftovers of a crashed save are garbage (DESIGN.md 5). Only rank 0 removes them, before
  // it can publish its first "prepared" key, so no rank is writing into them. A stale partition
  // leaves them alone: they may be the tmp directory of the current generation's save.
  if (rank_ == 0 && !stale_generation()) {
    try {
      storage::CheckpointDirectory(root_).remove_uncommitted();
    } catch (const std::exception& e) {
      logger("tenax.checkpoint")->warn("could not remove uncommitted checkpoint directories: {}", e.what());
    }
  }
}

bool Checkpointer::stale_generation() const {
  if (options_.fence_dir.empty()) return false;
  const StatusOr<std::int64_t> newest = elastic::GenerationFence(options_.fence_dir).current();
  if (newest.is_ok() && newest.value() <= generation_) return false;
  logger("tenax.checkpoint")
      ->warn("generation {} is not known to be current ({}); leaving uncommitted checkpoint directories alone",
             generation_,
             newest.is_ok() ? "generation " + std::to_string(newest.value()) + " formed" : newest.status().to_string());
  return true;
}

Checkpointer::~Checkpointer() {
  if (in_flight_) in_flight_->cancelled = true;
  writer_.reset();  // the save in flight (if any) ends first: cancelled, within kCancelLatency
}

std::optional<SaveResult> Checkpointer::save_async(SaveRequest request) {
  return start(std::move(request), Snapshot::kCopy);
}

void Checkpointer::reserve_snapshot(const NamedTensors& tensors) {
  // Between saves only: a save in flight still writes from its buffers (they become staging_
  // in wait()).
  if (in_flight_) return;
  for (const auto& [name, t] : tensors) {
    torch::Tensor& buffer = staging_[name];
    if (buffer.defined() && buffer.sizes().equals(t.sizes()) && buffer.scalar_type() == t.scalar_type()) continue;
    // A copy, not torch::empty: the copy writes every page, so the kernel maps them here.
    buffer = t.detach().to(torch::kCPU).clone(at::MemoryFormat::Contiguous);
  }
}

std::optional<SaveResult> Checkpointer::start(SaveRequest request, Snapshot snapshot) {
  const auto start = Clock::now();
  // Validate everything on every rank before any rank writes, so that a bad request fails
  // the same way everywhere.
  nlohmann::json state = as_object(request.trainer_state, "trainer_state");
  const nlohmann::json arguments = as_object(request.arguments, "arguments");
  // One list for the write plan, in the same order on every rank.
  const std::size_t copied_now = request.replicated.size();
  NamedTensors replicated = std::move(request.replicated);
  for (auto& entry : request.replicated_copied_late) replicated.push_back(std::move(entry));
  std::vector<std::size_t> sizes;
  sizes.reserve(replicated.size());
  for (const auto& [name, t] : replicated) {
    (void)to_storage_dtype(t.scalar_type());
    sizes.push_back(static_cast<std::size_t>(t.numel()) * t.element_size());
  }
  for (const auto& [name, t] : request.per_rank) (void)to_storage_dtype(t.scalar_type());
  if (!request.metrics.empty()) state["metrics"] = request.metrics;

  std::optional<SaveResult> previous = wait();
  trace_point("save.begin", request.step);

  auto job = std::make_shared<Job>();
  const std::vector<int> owner = storage::plan_writes(sizes, world_size_);
  job->owns_buffers = snapshot == Snapshot::kCopy;
  // The previous save's buffers (or reserve_snapshot()'s), by name: a run saves the same
  // tensors every time. snapshot_copy and the late copies check that one still fits.
  std::map<std::string, torch::Tensor> staging =
      job->owns_buffers ? std::exchange(staging_, {}) : std::map<std::string, torch::Tensor>();
  auto reusable = [&](const std::string& name) -> const torch::Tensor* {
    const auto it = staging.find(name);
    return it == staging.end() ? nullptr : &it->second;
  };
  std::optional<c10::DeviceIndex> copied_from_device;
  auto take = [&](const std::string& name, const torch::Tensor& t, bool late) {
    const torch::Tensor d = t.detach();
    if (d.is_cuda() && snapshot != Snapshot::kNoCopy) copied_from_device = d.device().index();
    if (snapshot == Snapshot::kNoCopy) {
      job->keep_alive.emplace_back(name, d.is_cpu() && d.is_contiguous() ? d : d.to(torch::kCPU).contiguous());
    } else if (late && d.is_cpu() && d.is_contiguous()) {
      const torch::Tensor* reuse = reusable(name);
      torch::Tensor staged = reuse != nullptr && reuse->sizes().equals(d.sizes()) &&
                                     reuse->scalar_type() == d.scalar_type() && reuse->is_contiguous()
                                 ? *reuse
                                 : torch::empty(d.sizes(), d.options());
      job->late_copies.emplace_back(d, staged);
      job->keep_alive.emplace_back(name, staged);
    } else {
      job->keep_alive.emplace_back(name, snapshot_copy(d, reusable(name)));
    }
    return job->keep_alive.back().second;
  };
  for (std::size_t i = 0; i < replicated.size(); ++i) {
    if (owner[i] != rank_) continue;
    job->plan.tensors.push_back(
        make_ref(replicated[i].first, take(replicated[i].first, replicated[i].second, i >= copied_now)));
  }
  for (const auto& [name, t] : request.per_rank) job->plan.tensors.push_back(make_ref(name, take(name, t, false)));
  detail::CommitPlan& plan = job->plan;
  plan.root = root_;
  plan.rank = rank_;
  plan.world_size = world_size_;
  plan.generation = generation_;
  plan.step = request.step;
  plan.epoch = request.epoch;
  plan.key_prefix = "ckpt/" + std::to_string(request.step) + "/" + std::to_string(saves_started_++) + "/";
  plan.trainer_state = std::move(state);
  plan.arguments = arguments;
  plan.save_total_limit = options_.save_total_limit;
  plan.metric_for_best_model = options_.metric_for_best_model;
  plan.greater_is_better = options_.greater_is_better;
  plan.timeout = options_.commit_timeout;
  plan.fence_dir = options_.fence_dir;
#ifdef TENAX_CUDA
  if (copied_from_device) {
    job->device_copies.emplace();
    job->device_copies->record(c10::cuda::getCurrentCUDAStream(*copied_from_device));
  }
#else
  // This libtorch has no CUDA: no tensor can be on a GPU.
  if (copied_from_device) throw ConfigError("Checkpointer: a CUDA tensor in a build without CUDA");
#endif
  job->snapshot_seconds = seconds_since(start);
  start_writer(std::move(job));
  return previous;
}

void Checkpointer::start_writer(std::shared_ptr<Job> job) {
  in_flight_ = job;
  if (!writer_) writer_ = std::make_unique<detail::WriterThread>();
  writer_->post([job = std::move(job), store = store_.get()]() mutable {
#ifdef TENAX_CUDA
    if (job->device_copies) job->device_copies->synchronize();
#endif
    // The late copies first: the training thread may be waiting for them (wait_for_snapshot).
    // Plain memcpy, one thread: it overlaps the training thread's compute instead of
    // competing with it for the intra-op thread pool.
    for (const auto& [source, staged] : job->late_copies) {
      std::memcpy(staged.data_ptr(), source.data_ptr(), static_cast<std::size_t>(source.nbytes()));
    }
    job->copied.set_value();
    trace_point("save.copied", job->plan.step);
    const auto start = Clock::now();
    detail::CommitOutcome outcome = detail::run_commit(job->plan, *store, job->cancelled, kCancelLatency);
    SaveResult result(job->plan.step, outcome.outcome, std::move(outcome.error), std::move(outcome.dir));
    result.write_seconds = seconds_since(start);
    // This thread lets go of the job before the training thread can see the result, so the
    // job, and the tensors it references, are freed by the training thread (wait()), never
    // here behind libtorch's back.
    std::promise<SaveResult> done = std::move(job->result);
    job.reset();
    done.set_value(std::move(result));
  });
}

void Checkpointer::wait_for_snapshot() {
  if (!in_flight_) return;
  const auto start = Clock::now();
  in_flight_->copied_future.wait();
  in_flight_->snapshot_seconds += seconds_since(start);
}

std::optional<SaveResult> Checkpointer::wait() {
  if (!in_flight_) return std::nullopt;
  wait_for_snapshot();
  SaveResult result;
  {
    // The commit waits for every rank's shard: a stopped peer stops it, and --hang-timeout's
    // beacon must not take this rank, blocked here, for the culprit.
    const elastic::PeerWaitGuard on_peers;
    result = in_flight_->future.get();
  }
  result.snapshot_seconds = in_flight_->snapshot_seconds;
  // Written: the buffers are free to be copied into next time (never the caller's own).
  if (in_flight_->owns_buffers) {
    staging_.clear();
    for (auto& [name, buffer] : in_flight_->keep_alive) staging_.emplace(name, std::move(buffer));
  }
  in_flight_.reset();
  return result;
}

std::filesystem::path Checkpointer::save(SaveRequest request) {
  if (auto previous = start(std::move(request), Snapshot::kNoCopy);
      previous && previous->outcome != SaveOutcome::kCommitted) {
    logger("tenax.checkpoint")->error("an earlier checkpoint failed: {}", previous->error);
  }
  SaveResult result = *wait();
  switch (result.outcome) {
    case SaveOutcome::kCommitted: return result.dir;
    case SaveOutcome::kFenced: throw RendezvousError(result.error);
    case SaveOutcome::kFailed:
    case SaveOutcome::kSuperseded: break;
  }
  throw StorageError(result.error);
}

namespace {

// One checkpoint read whole, or the fault that stopped it; `in_place` says whether it wrote into
// caller-owned memory before it failed.
std::optional<LoadedCheckpoint> try_load(const std::filesystem::path& dir,
                                         const std::function<bool(const std::string&)>& wanted,
                                         const Checkpointer::LoadDestination& destination, std::string& fault,
                                         bool& in_place) {
  auto reader = storage::CheckpointReader::open(dir);
  if (!reader.is_ok()) {
    fault = reader.status().to_string();
    return std::nullopt;
  }
  const storage::Manifest& manifest = reader.value().manifest();
  LoadedCheckpoint loaded;
  loaded.dir = dir;
  loaded.step = manifest.step;
  loaded.epoch = manifest.epoch;
  loaded.world_size = manifest.world_size;
  loaded.trainer_state = manifest.trainer_state;
  loaded.arguments = manifest.arguments;
  std::vector<storage::ReadTarget> targets;
  for (const auto& [name, entry] : manifest.tensors) {
    if (!wanted(name)) continue;
    const auto dtype = to_torch_dtype(entry.dtype);
    torch::Tensor t = destination ? destination(name) : torch::Tensor();
    if (t.defined() && t.is_cpu() && t.is_contiguous() && t.scalar_type() == dtype && t.sizes().equals(entry.shape)) {
      in_place = true;
    } else {
      t = torch::empty(entry.shape, torch::TensorOptions().dtype(dtype));
    }
    targets.push_back({name, t.data_ptr(), static_cast<std::size_t>(t.nbytes())});
    loaded.tensors.emplace(name, std::move(t));
  }
  const Status read = reader.value().read_all_into(targets);
  if (!read.is_ok()) {
    fault = read.to_string();
    return std::nullopt;
  }
  return loaded;
}

}  // namespace

std::optional<LoadedCheckpoint> Checkpointer::load_latest(const std::function<bool(const std::string&)>& wanted,
                                                          const LoadDestination& destination) const {
  auto log = logger("tenax.checkpoint");
  if (!std::filesystem::exists(root_)) return std::nullopt;
  storage::CheckpointDirectory directory(root_);
  std::vector<std::int64_t> steps = directory.committed_steps();
  bool clobbered = false;  // a failed attempt wrote into caller-owned memory
  std::vector<std::string> faults;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::filesystem::path dir = directory.step_dir(*it);
    std::string fault;
    bool in_place = false;
    if (auto loaded = try_load(dir, wanted, destination, fault, in_place)) return loaded;
    clobbered = clobbered || in_place;
    log->warn("skipping checkpoint {}: {}; falling back to the previous one", dir.string(), fault);
    faults.push_back(fault);
  }
  if (clobbered) {
    throw StorageError("no checkpoint in " + root_.string() + " could be loaded (" + std::to_string(faults.size()) +
                       " tried; newest fault: " + faults.front() +
                       ") and the failed attempts overwrote the model in place. Refusing to train on from "
                       "those weights: repair the checkpoints or move " +
                       root_.string() + " aside to start over");
  }
  return std::nullopt;
}

LoadedCheckpoint Checkpointer::load_from(const std::filesystem::path& step_dir,
                                         const std::function<bool(const std::string&)>& wanted,
                                         const LoadDestination& destination) const {
  std::string fault;
  bool in_place = false;
  if (auto loaded = try_load(step_dir, wanted, destination, fault, in_place)) return std::move(*loaded);
  throw StorageError("the checkpoint " + step_dir.string() + " cannot be loaded: " + fault + " (`tenax ckpt verify " +
                     step_dir.string() + "` says more)");
}

}  // namespace tenax::sdk

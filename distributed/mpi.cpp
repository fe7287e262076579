// The MPI world: host collectives with MPI, asynchronous ones on a communication thread with its own
// communicator, device collectives with NCCL (bootstrapped over MPI) or staged through host memory.
#include "distributed/mpi.h"

#if EMBER_HAS_MPI

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "core/stream.h"
#include "base/error.h"
#include "distributed/nccl.h"

namespace ember::dist {

namespace {


void mpi_check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw IoError(detail::concat(what, " failed: ", std::string(text, static_cast<size_t>(length)),
                               " (a rank may have died; mpirun's messages name it)"));
}

MPI_Datatype mpi_type(DType dtype) {
  EMBER_CHECK(dtype == DType::F32 || dtype == DType::F64, DTypeError, "all-reduce sums f32 or f64 tensors, got ",
              dtype_name(dtype));
  return dtype == DType::F32 ? MPI_FLOAT : MPI_DOUBLE;
}

// MPI counts are int: large buffers go in pieces.
constexpr int64_t kMaxCount = int64_t{1} << 30;

void all_reduce_host(MPI_Comm comm, void* data, int64_t count, DType dtype) {
  const size_t elem = dtype_size(dtype);
  for (int64_t at = 0; at < count; at += kMaxCount)
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * elem,
                            static_cast<int>(std::min(kMaxCount, count - at)), mpi_type(dtype), MPI_SUM, comm),
              "MPI_Allreduce");
}

void broadcast_bytes(MPI_Comm comm, void* data, int64_t bytes, int root) {
  for (int64_t at = 0; at < bytes; at += kMaxCount)
    mpi_check(MPI_Bcast(static_cast<char*>(data) + at, static_cast<int>(std::min(kMaxCount, bytes - at)), MPI_BYTE,
                        root, comm),
              "MPI_Bcast");
}

void require_contiguous(const Tensor& t, const char* what) {
  EMBER_CHECK(t.is_contiguous(), ValueError, what, " needs a contiguous tensor; call .contiguous() first");
}

// A collective running on the communication thread; wait() joins it and rethrows its error.
struct Pending {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  double seconds = 0;
  std::exception_ptr error;
};

class ThreadWork : public Work {
 public:
  ThreadWork(std::shared_ptr<Pending> p, std::function<void()> after) : p_(std::move(p)), after_(std::move(after)) {}
  void wait() override {
    {
      std::unique_lock<std::mutex> lock(p_->mutex);
      p_->done_cv.wait(lock, [&] { return p_->done; });
    }
    if (p_->error) std::rethrow_exception(p_->error);
    if (after_) after_();
  }
  double seconds() const override { return p_->seconds; }

 private:
  std::shared_ptr<Pending> p_;
  std::function<void()> after_;
};

// NCCL on the collective stream: the compute stream's work so far comes first, and wait() orders the
// compute stream after the collective; the host never blocks.
class StreamWork : public Work {
 public:
  StreamWork(cuda::Event done, Device device) : done_(std::move(done)), device_(device) {}
  void wait() override { cuda::Stream::compute(device_).wait(done_); }

 private:
  cuda::Event done_;
  Device device_;
};

// One thread that runs queued collectives in order (every rank queues them in the same order).
class CommThread {
 public:
  CommThread() : thread_([this] { loop(); }) {}
  ~CommThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  std::shared_ptr<Pending> submit(std::function<void()> job) {
    auto p = std::make_shared<Pending>();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.emplace_back(p, std::move(job));
    }
    cv_.notify_all();
    return p;
  }

 private:
  void loop() {
    for (;;) {
      std::pair<std::shared_ptr<Pending>, std::function<void()>> item;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      auto start = std::chrono::steady_clock::now();
      std::exception_ptr error;
      try {
        item.second();
      } catch (...) {
        error = std::current_exception();
      }
      Pending& p = *item.first;
      {
        std::lock_guard<std::mutex> lock(p.mutex);
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        p.error = error;
        p.done = true;
      }
      p.done_cv.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<Pending>, std::function<void()>>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

class MpiWorld : public Communicator {
 public:
  MpiWorld() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided_), "MPI_Init_thread");
    else MPI_Query_thread(&provided_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &async_comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm local;
    mpi_check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local), "MPI_Comm_split_type");
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
    // Collectives on two communicators from two threads need MPI_THREAD_MULTIPLE; without it the
    // asynchronous ones run at once on the caller's thread (correct, without overlap).
    if (provided_ >= MPI_THREAD_MULTIPLE) thread_ = std::make_unique<CommThread>();
  }
  ~MpiWorld() override {
    thread_.reset();
    nccl_.reset();
    MPI_Comm_free(&async_comm_);
    MPI_Comm_free(&comm_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  std::string describe(Device device) const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string v(version, static_cast<size_t>(length));
    v = v.substr(0, v.find_first_of(",\n"));
    std::string out = detail::concat("MPI (", v, ", ", size_, " ranks",
                                     provided_ >= MPI_THREAD_MULTIPLE ? "" : ", no communication thread", ")");
    if (device.is_cuda())
      out += nccl_ ? ", device tensors over " + nccl_version()
                   : ", device tensors staged through pinned host memory (" + nccl_why_ + ")";
    return out;
  }

  void all_reduce_sum(Tensor& t) override {
    require_contiguous(t, "all_reduce_sum");
    if (t.device().is_cpu()) return all_reduce_host(comm_, t.raw_data(), t.numel(), t.dtype());
    if (NcclComm* n = nccl_for(t.device())) {
      return nccl_all_reduce_sum(*n, t.raw_data(), t.numel(), t.dtype(), cuda::Stream::compute(t.device()));
    }
    Tensor host = t.to(Device::cpu());  // pinned; the ledger counts both copies
    all_reduce_host(comm_, host.raw_data(), host.numel(), host.dtype());
    t.copy_from(host);
  }

  std::unique_ptr<Work> all_reduce_sum_async(Tensor t) override {
    require_contiguous(t, "all_reduce_sum_async");
    mpi_type(t.dtype());
    if (t.device().is_cuda()) {
      if (NcclComm* n = nccl_for(t.device())) return nccl_async(*n, t);
      Tensor host = t.to(Device::cpu());
      return host_async(host, [t, host]() mutable { t.copy_from(host); });
    }
    return host_async(t, nullptr);
  }

  void broadcast(Tensor& t, int root) override {
    require_contiguous(t, "broadcast");
    const int64_t bytes = t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    if (t.device().is_cpu()) return broadcast_bytes(comm_, t.raw_data(), bytes, root);
    if (NcclComm* n = nccl_for(t.device()))
      return nccl_broadcast(*n, t.raw_data(), bytes, root, cuda::Stream::compute(t.device()));
    Tensor host = t.to(Device::cpu());
    broadcast_bytes(comm_, host.raw_data(), bytes, root);
    t.copy_from(host);
  }

  std::vector<double> all_reduce_sum(const std::vector<double>& values) override {
    std::vector<double> out(values);
    all_reduce_host(comm_, out.data(), static_cast<int64_t>(out.size()), DType::F64);
    return out;
  }

  std::vector<uint64_t> all_gather(uint64_t value) override {
    std::vector<uint64_t> out(static_cast<size_t>(size_));
    mpi_check(MPI_Allgather(&value, 1, MPI_UINT64_T, out.data(), 1, MPI_UINT64_T, comm_), "MPI_Allgather");
    return out;
  }

  void barrier() override { mpi_check(MPI_Barrier(comm_), "MPI_Barrier"); }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

 private:
  std::unique_ptr<Work> host_async(Tensor host, std::function<void()> after) {
    MPI_Comm comm = async_comm_;
    auto job = [comm, host]() mutable { all_reduce_host(comm, host.raw_data(), host.numel(), host.dtype()); };
    if (!thread_) {
      auto p = std::make_shared<Pending>();
      auto start = std::chrono::steady_clock::now();
      job();
      p->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      p->done = true;
      return std::make_unique<ThreadWork>(p, std::move(after));
    }
    return std::make_unique<ThreadWork>(thread_->submit(std::move(job)), std::move(after));
  }

  std::unique_ptr<Work> nccl_async(NcclComm& n, const Tensor& t) {
    const cuda::Stream compute = cuda::Stream::compute(t.device()), collective = cuda::Stream::collective(t.device());
    cuda::Event ready;
    ready.record(compute);
    collective.wait(ready);  // the gradients in t are written by the compute stream's backward
    nccl_all_reduce_sum(n, t.raw_data(), t.numel(), t.dtype(), collective);
    cuda::Event done;
    done.record(collective);
    return std::make_unique<StreamWork>(std::move(done), t.device());
  }

  // The NCCL communicator of the run's device, started on the first device collective (every rank reaches
  // it at the same point: the first broadcast of the weights); nullptr where NCCL cannot run.
  NcclComm* nccl_for(Device device) {
    if (!nccl_tried_) {
      nccl_tried_ = true;
      auto share = [this](void* data, size_t bytes) { broadcast_bytes(comm_, data, static_cast<int64_t>(bytes), 0); };
      nccl_ = nccl_start(rank_, size_, device.index, share, &nccl_why_);
    }
    return nccl_.get();
  }

  int provided_ = 0, rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL, async_comm_ = MPI_COMM_NULL;
  std::unique_ptr<CommThread> thread_;
  bool nccl_tried_ = false;
  std::unique_ptr<NcclComm, void (*)(NcclComm*)> nccl_{nullptr, [](NcclComm*) {}};
  std::string nccl_why_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() { return std::make_unique<MpiWorld>(); }

}  // namespace ember::dist

#endif

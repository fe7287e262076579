// The data-parallel side of training (PyTorch DDP's semantics, docs/distributed.md): one start for every
// rank, gradients summed in buckets while backward runs, and a check that the ranks stay identical.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "nn/container.h"

namespace ember::dist {

// What a run's gradient all-reduces cost on one rank.
struct AllReduceStats {
  int64_t steps = 0, buckets = 0, bytes_per_step = 0;
  double collective_seconds = 0;  // time the all-reduces ran (on the communication thread)
  double wait_seconds = 0;        // time from the end of backward until every bucket was summed (exposed)
};

// Copies rank `root`'s parameter values and buffers into every other rank's model.
void broadcast_state(dist::Communicator& comm, nn::Module& model, int root = 0);

// FNV-1a over the bytes of every parameter value, in state_dict order: equal exactly when the bits are.
uint64_t parameter_checksum(const nn::Module& model);

// Throws NumericalError naming the ranks whose parameters differ from rank 0's (every rank throws alike);
// returns the common checksum.
uint64_t check_same_parameters(dist::Communicator& comm, const nn::Module& model, const std::string& when);

// Sums the gradients of `model` over the ranks in buckets of at most `bucket_bytes` (or one parameter, when
// larger), filled in backward's order, each started as soon as backward has finished every gradient in it.
// The gradients become views of the buckets' flat tensors (DDP's gradient_as_bucket_view), so nothing is
// copied on the host. With one rank it does nothing. A model that is not an nn::Sequential has no per-child hook:
// its buckets all start in finish(), after backward.
//
// Per step: model.backward(...) (the hook starts buckets), then finish() before the optimizer step.
// The loss gradient of each rank must be scaled to its share of the global batch (local / global rows), so
// that the sum over ranks is the single-process gradient of the whole batch.
class GradientReducer {
 public:
  GradientReducer(dist::Communicator& comm, nn::Module& model, int64_t bucket_bytes = int64_t{1} << 20);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Starts the buckets backward did not reach, then waits for all of them.
  void finish();

  const AllReduceStats& stats() const { return stats_; }
  // "4 bucket(s), 0.9 MB a step, all-reduce 1.2 ms a step, 80% of it hidden behind backward"
  std::string summary() const;

 private:
  struct Bucket;
  void child_done(size_t child);
  void launch(Bucket& bucket);

  dist::Communicator& comm_;
  nn::Sequential* hooked_ = nullptr;  // the model, when backward reports each child
  std::chrono::steady_clock::time_point backward_end_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::vector<size_t>> buckets_of_child_;
  AllReduceStats stats_;
};

}  // namespace ember::dist

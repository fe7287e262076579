// Which samples make up each batch of an epoch: the seeded epoch order, and a batch's rows when the global
// batch is shared out among the ranks of a data-parallel run.
#pragma once

#include <cstdint>
#include <vector>

namespace ember::data {

// The order of epoch `epoch`: a permutation of 0..n-1 by Fisher-Yates over Philox4x32-10 keyed
// by (seed, epoch). Defined bit for bit (no std::shuffle), so it is the same on every platform.
void epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, std::vector<int64_t>& order);

// Batches of `batch_size` positions of an epoch's order over `samples` samples (the last one shorter unless
// drop_last), each split among `shard_count` shards: shard r of R takes rows [b*r/R, b*(r+1)/R) of a batch
// of b rows. (PyTorch's DistributedSampler splits by sample instead; this keeps the global batch the step of a
// single process, so R shards sum to exactly its gradient.)
struct BatchPlan {
  int64_t samples = 0, batch_size = 1;
  bool drop_last = false;
  int64_t shard_rank = 0, shard_count = 1;

  int64_t batches() const { return drop_last ? samples / batch_size : (samples + batch_size - 1) / batch_size; }
  // Samples one epoch covers: all of them, or whole batches only with drop_last.
  int64_t epoch_samples() const { return drop_last ? batches() * batch_size : samples; }
  // Rows of batch `b` over every shard (the global batch).
  int64_t global_rows(int64_t b) const { return batch_size < samples - b * batch_size ? batch_size : samples - b * batch_size; }
  // This shard's rows of batch `b`, and the position in the epoch's order of its first one.
  int64_t rows(int64_t b) const { return global_rows(b) * (shard_rank + 1) / shard_count - shard_begin(b); }
  int64_t first(int64_t b) const { return b * batch_size + shard_begin(b); }

 private:
  int64_t shard_begin(int64_t b) const { return global_rows(b) * shard_rank / shard_count; }
};

}  // namespace ember::data

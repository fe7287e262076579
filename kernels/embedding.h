// Embedding lookup, PyTorch's F.embedding: a gather of rows of weight (V, E) by integer ids (int32 or int64), and its
// backward, a scatter-add of the output gradient's rows into grad_weight. Every array is contiguous; the ids are n
// in number (any shape, flattened). Both backwards add each row's contributions in the order of the ids, so
// repeated ids give the same bits on the host, on CUDA and at any thread count.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"
#include "kernels/common.h"

namespace ember::kernels {

// The one-line error of an id outside [0, V), the same on both twins: "embedding(): id 1000 at position 7 ...".
inline std::string embedding_bad_id_message(const char* op, int64_t id, int64_t position, int64_t V) {
  return detail::concat(op, "(): id ", id, " at position ", position, " of ids (flattened) is out of range for ", V,
                        " embeddings (valid ids are 0..", V - 1,
                        "); make num_embeddings at least the vocabulary size, or fix the ids");
}

namespace cpu {
// out (n, E) = weight[ids]. Checks every id before reading any row: ValueError (the message above) for the first
// id outside [0, V), with nothing written.
template <typename T, typename I>
void embedding_forward(const T* weight, const I* ids, T* out, int64_t n, int64_t V, int64_t E);
// grad_weight (V, E) += grad_out (n, E) row i added at row ids[i]. Checks the ids first, as the forward does. Tasks
// own ranges of vocabulary rows (cut by the sizes alone), so the bits do not depend on the thread count.
template <typename T, typename I>
void embedding_backward(const T* grad_out, const I* ids, T* grad_weight, int64_t n, int64_t V, int64_t E);
}  // namespace cpu

namespace cuda {
// A kernel cannot throw: `bad_position` (one int64 in device memory, set to n by the caller) is lowered to the
// smallest position whose id is outside [0, V). Such a row reads nothing and is written as zeros.
// A warp per row.
template <typename T, typename I>
void embedding_forward(const T* weight, const I* ids, T* out, int64_t n, int64_t V, int64_t E, int64_t* bad_position,
                       Stream stream);
// A block per range of vocabulary rows scans every id in order and adds the rows of its range, each thread owning
// columns: no atomics on the gradient, so no race and the same bits every run (equal to the CPU twin's). A bad id
// matches no range (nothing read or written for it) and lowers `bad_position` as in the forward.
template <typename T, typename I>
void embedding_backward(const T* grad_out, const I* ids, T* grad_weight, int64_t n, int64_t V, int64_t E,
                        int64_t* bad_position, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels

// The float convolution's forward, weight-gradient and input-gradient products by ember's own AVX-512 kernels, for
// kernels/cpu/conv.cpp (docs/kernels.md, "The convolution's own products").
//
// Forward, with no im2col matrix, no OpenBLAS and no scatter: each 48-column panel of the product's right-hand side
// is packed straight from the NCHW input (a masked load per plane and tap zeroes the pixels whose tap falls off the
// plane), eight filters at a time run an 8 x 48 tile of fused multiply-adds over the filter depth, and the tile goes
// straight into NCHW with the bias added. Weight gradient: from the GEMM path's im2col columns and gathered output
// gradient, the latter transposed (16 x 16 blocks in registers) so that 64 filters are four vectors; 6 x 64 tiles run
// over the columns. Both sum each output over depth_block's blocks in order. Input gradient, with no im2col matrix and
// no col2im: eight input channels x 48 pixels of dx at a time, from the chunk's gathered output gradient with a masked
// load per filter and tap, one chain over the filters a tap, the taps added in order.
//
// Only where GCC builds for x86-64 (EMBER_HOST_AVX512, kernels/cpu/isa.h); elsewhere all three are OpenBLAS's.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cpu/isa.h"

#if EMBER_HOST_AVX512
namespace ember::kernels::cpu::packed {

// Whether the forward runs here: the AVX-512 build is running, the geometry has stride 1 with output rows as wide as
// the input's (each tap reads the input plane moved by an offset), at least 16 outputs an image (a vector of 16 then
// spans at most two images), and filters at least kMinDepth deep. A shallower layer (the CNN's first, 9 deep) stays
// on the GEMM path: its forward's time is writing the output, which that path streams past the caches
// (kernels/cpu/stream_store.h; the tiles' plain stores took 0.48-0.51 against 0.43 ms a step at two threads), and
// its weight gradient, a small product, OpenBLAS sums in another order than depth_block's.
constexpr int64_t kMinDepth = 64;
bool forward_applies(const Conv2dGeometry& g);

// What a call's tasks share, made once a call: the filters packed as the tiles read them (blocks of eight filters,
// depth-major, zero filters past the last) and each tap's offset into a plane and masks (bit l of
// masks[t * pixels + p]: output pixel p + l of an image reads inside the plane at tap t).
struct Plan {
  std::vector<float> filters;
  int64_t filter_count = 0, depth = 0;
  std::vector<int64_t> offsets;
  std::vector<uint16_t> masks;
  int64_t planes = 0, plane = 0, image = 0;  // input planes an image, elements a plane, elements an image
  int64_t pixels = 0;                        // output pixels an image
};
Plan forward_plan(const Conv2dGeometry& g, const float* weight);

// Whether the weight gradient's product runs here: the AVX-512 build is running and the filters are at least
// kMinDepth deep (any geometry: it reads the same im2col columns as the GEMM path).
bool weight_gradient_applies(const Conv2dGeometry& g);
// The row stride of the weight gradient's partial sums, which this product keeps transposed: (CKK, this) for OC
// filters, OC rounded up to a vector of 16.
int64_t weight_gradient_stride(int64_t filters);

// Whether the input gradient runs here: the AVX-512 build is running, stride 1 with input and output planes of one
// size (dx's pixel p then reads dy's pixel p - offset at each tap), at least 16 pixels an image, at least 8 input
// channels (a tile's; with one, as at the CNN's first layer, seven eighths of each tile would be idle: 3.7x slower
// than the GEMM path), and at most kMaxInputFilters filters: each tap's sum over the filters is then one chain of
// fused multiply-adds, as OpenBLAS's AVX-512 kernels sum the GEMM path's weight^T @ dy (one depth block), and the taps
// are added in col2im's order, so the bits are the GEMM path's on SkylakeX and Cooperlake.
constexpr int64_t kMaxInputFilters = 320;
bool input_gradient_applies(const Conv2dGeometry& g);

// What an input gradient's tasks share: the weights as the tiles read them (blocks of eight input channels; in each,
// rows tap * filters + o of eight, zero channels past the last), each tap's offset (dx's pixel p reads dy's pixel
// p - offset) and masks (bit l of masks[t * pixels + p]: pixel p + l of an image has its tap-t source inside dy's
// plane).
struct InputPlan {
  std::vector<float> weights;
  int64_t channels = 0, filters = 0, pixels = 0;
  std::vector<int64_t> offsets;
  std::vector<uint16_t> masks;
};
InputPlan input_plan(const Conv2dGeometry& g, const float* weight);

// How many of `remaining` depth steps the next block sums: 448, half of what is left (rounded up to 16) when that is
// under 896, or all. Each output sums each block in one chain of fused multiply-adds from 0 and adds the block's sum
// to its total. That is the order of OpenBLAS 0.3.21's SkylakeX kernels (its Cooperlake kernels sum blocks of 320),
// so where OpenBLAS runs its general kernels (as for the default CNN's conv2) these products give the GEMM path's
// bits on SkylakeX, and a CNN trained before them trains on to the same weights. tests/kernels/test_conv.cpp writes
// the order out and checks both products against it.
int64_t depth_block(int64_t remaining);

namespace avx512 {  // AVX-512 code: call only where forward_applies, weight_gradient_applies or
                    // input_gradient_applies said so
// The chunk's NCHW output y (chunk images) = conv(x, weight) + bias (bias may be null), x the chunk's input.
void forward_chunk(const Plan& plan, const float* x, const float* bias, int64_t chunk, float* y);
// partial_t (CKK rows, weight_gradient_stride(filters) apart) = (first ? 0 : partial_t) + (rows @ col^T)^T for rows
// (filters, cols) and col (CKK, cols), both rows `cols` long: the weight gradient of one chunk of im2col columns.
void weight_gradient_chunk(int64_t filters, int64_t CKK, int64_t cols, const float* rows, const float* col, bool first,
                           float* partial_t);
// The chunk's NCHW input gradient dx (chunk images, overwritten) from its gathered output gradient rows (filters,
// chunk * pixels).
void input_gradient_chunk(const InputPlan& plan, const float* rows, int64_t chunk, float* dx);
}  // namespace avx512

}  // namespace ember::kernels::cpu::packed
#endif

// ember's ops on Tensors, one header per op family (core/ops/). Each op checks devices, dtypes and shapes
// (in that order), allocates its output on the common device and dispatches once to kernels::cpu or
// kernels::cuda; on meta tensors it only infers the output shape.
#pragma once

#include "core/ops/attention.h"
#include "core/ops/batchnorm.h"
#include "core/ops/bmm.h"
#include "core/ops/conv.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/embedding.h"
#include "core/ops/gelu.h"
#include "core/ops/heads.h"
#include "core/ops/layernorm.h"
#include "core/ops/linear.h"
#include "core/ops/optim.h"
#include "core/ops/pool.h"
#include "core/ops/random.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax_xent.h"
#include "core/ops/tokens.h"

// Everything of ember's nn layer in one include.
#pragma once

#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/batchnorm.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/flatten.h"
#include "nn/fuse.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/pool.h"
#include "nn/summary.h"
#include "nn/transformer.h"

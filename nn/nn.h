// Everything of ember's nn layer in one include.
#pragma once

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/summary.h"

// Everything of ember's nn layer in one include.
#pragma once

#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/summary.h"

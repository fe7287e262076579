// <cuda_runtime.h> of the emulated build (-DEMBER_CUDA=EMULATED): the runtime API and the device language,
// both implemented on the CPU by ember's emulator (emu/, docs/emulation.md).
#pragma once

#include "emu/api.h"
#include "emu/device.h"

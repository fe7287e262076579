// Binary PGM (P5) images, the simplest file a user can draw one grayscale image into (`ember predict --pgm`).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace ember::formats {

// A P5 PGM of exactly `height` x `width` pixels with maxval 255 (comments allowed), as u8 (1, height, width) on
// the host. IoError when it cannot be read, FormatError naming what differs (magic, size, maxval, pixel count).
Tensor read_pgm(const std::string& path, int64_t height, int64_t width);

}  // namespace ember::formats

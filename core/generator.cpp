// The default generator.
#include "core/generator.h"

namespace ember {

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

}  // namespace ember

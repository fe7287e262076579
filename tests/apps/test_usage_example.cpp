// Runs the program shown in docs/usage.md (extracted at configure time), so the docs cannot go stale.
#include <catch2/catch.hpp>

#include <cmath>
#include <utility>

#include "usage_example.inc"

TEST_CASE("The seed-lesson program of docs/usage.md runs and learns", "[apps]") {
  auto [first, last] = seed_lesson();
  INFO("mean loss of the first five steps " << first << ", of the last five " << last);
  CHECK(std::isfinite(last));
  CHECK(last < 0.95 * first);  // it learns: the loss falls
}

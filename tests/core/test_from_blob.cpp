// Tensor::from_blob and Storage::wrap: tensors over memory ember did not allocate (DLPack's consumer), and select.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "core/ops.h"
#include "core/tensor.h"

using namespace ember;

TEST_CASE("from_blob shares the caller's memory and runs the deleter once, when the last view dies", "[core]") {
  std::vector<float> memory = {1, 2, 3, 4, 5, 6};
  int deleted = 0;
  {
    Tensor t = Tensor::from_blob(memory.data(), {2, 3}, {}, DType::F32, Device::cpu(), [&] { ++deleted; });
    CHECK(t.strides() == Shape{3, 1});
    CHECK(t.storage()->is_external());
    CHECK(t.raw_data() == memory.data());
    memory[4] = 50;  // a write on the owner's side is seen by the tensor
    CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 50, 6});
    ops::fill_(t, 7);  // and one through the tensor is seen by the owner
    CHECK(memory[0] == 7);
    Tensor view = t.slice(1, 1, 3);
    t = Tensor();
    CHECK(deleted == 0);  // the view holds the storage
    CHECK(view.to_vector<float>() == std::vector<float>{7, 7, 7, 7});
  }
  CHECK(deleted == 1);
}

TEST_CASE("from_blob takes strides, and refuses negative ones and mismatched counts", "[core]") {
  std::vector<int32_t> memory = {0, 1, 2, 3, 4, 5};
  Tensor t = Tensor::from_blob(memory.data(), {3, 2}, {1, 3}, DType::I32, Device::cpu(), [] {});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.storage()->nbytes() == 6 * sizeof(int32_t));
  CHECK(t.contiguous().to_vector<int32_t>() == std::vector<int32_t>{0, 3, 1, 4, 2, 5});
  CHECK_THROWS_AS(Tensor::from_blob(memory.data(), {2}, {-1}, DType::I32, Device::cpu(), [] {}), ValueError);
  CHECK_THROWS_AS(Tensor::from_blob(memory.data(), {2, 3}, {1}, DType::I32, Device::cpu(), [] {}), ShapeError);
  int deleted = 0;
  { Tensor empty = Tensor::from_blob(nullptr, {0, 4}, {}, DType::F32, Device::cpu(), [&] { ++deleted; }); }
  CHECK(deleted == 1);  // an empty tensor's owner is told too
}

TEST_CASE("select drops a dim and shares storage", "[core]") {
  Tensor t = Tensor::arange(6).view({2, 3});
  Tensor row = t.select(0, 1), col = t.select(1, -1);
  CHECK(row.shape() == Shape{3});
  CHECK(row.to_vector<float>() == std::vector<float>{3, 4, 5});
  CHECK(col.strides() == Shape{3});
  CHECK(col.to_vector<float>() == std::vector<float>{2, 5});
  CHECK(t.select(0, 0).select(0, 2).dim() == 0);
  CHECK_THROWS_AS(t.select(0, 2), ShapeError);
}

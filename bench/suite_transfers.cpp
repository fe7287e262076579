// transfers: host memcpy and D2D copy bandwidth, H2D/D2H from pageable and pinned memory (sync and
// async), and copy/compute overlap on two streams versus one.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "bench/suites.h"
#include "core/cuda_runtime.h"
#include "core/ops/linear.h"

namespace ember::bench {

namespace {

using cuda::runtime::CopyKind;

std::vector<int64_t> transfer_sizes(bool quick) {
  if (quick) return {4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  std::vector<int64_t> sizes;
  for (int64_t s = 4 << 10; s <= (int64_t(1) << 30); s *= 4) sizes.push_back(s);
  return sizes;
}

Tensor bytes_on(int64_t n, Device device, bool pinned = false) {
  return Tensor::empty({n}, DType::U8, device, pinned);
}

Row base_row(const std::string& table, const std::string& name, int64_t size, const std::string& column,
             const std::string& device, const char* timer, double bytes) {
  Row r;
  r.suite = "transfers";
  r.table = table;
  r.name = name;
  r.label = format_bytes(static_cast<double>(size));
  r.params = {{"bytes", size}};
  r.size = static_cast<double>(size);
  r.column = column;
  r.device = device;
  r.timer = timer;
  r.bytes = bytes;
  return r;
}

const char* kCopyTable = "copy bandwidth (bytes read + written)";

void host_memcpy_rows(BenchContext& ctx, const std::vector<int64_t>& sizes) {
  const int64_t max_size = sizes.back();
  Tensor src = bytes_on(max_size, Device::cpu()), dst = bytes_on(max_size, Device::cpu());
  std::memset(src.raw_data(), 1, static_cast<size_t>(max_size));
  std::memset(dst.raw_data(), 0, static_cast<size_t>(max_size));
  for (int64_t s : sizes) {
    ctx.progress("transfers: host memcpy " + format_bytes(double(s)));
    Row row = base_row(kCopyTable, "memcpy", s, "host memcpy", "cpu", "steady_clock", 2.0 * double(s));
    ctx.add(measured(row, sample_host([&] { std::memcpy(dst.raw_data(), src.raw_data(), size_t(s)); }, ctx.timing)));
  }
}

struct BusMode {
  const char* direction;  // "H2D" | "D2H"
  bool pinned;
  bool async;
  std::string column() const { return std::string(pinned ? "pinned" : "pageable") + (async ? " async" : " sync"); }
  std::string name() const {
    return std::string(direction[0] == 'H' ? "h2d" : "d2h") + (pinned ? "_pinned" : "_pageable") +
           (async ? "_async" : "_sync");
  }
};

const BusMode kBusModes[] = {{"H2D", false, false}, {"H2D", false, true}, {"H2D", true, false}, {"H2D", true, true},
                             {"D2H", false, false}, {"D2H", false, true}, {"D2H", true, false}, {"D2H", true, true}};

std::string bus_table(const BusMode& m) {
  return std::string(m.direction) + " over PCIe (bytes copied; sync: host clock around a blocking copy, "
                                    "async: CUDA events around cudaMemcpyAsync)";
}

const char* kOverlapTable = "copy/compute overlap (pinned H2D in 8 chunks, GEMMs on each chunk's arrival)";

void unavailable_device_rows(BenchContext& ctx, const std::vector<int64_t>& sizes, int64_t overlap_bytes) {
  for (int64_t s : sizes)
    ctx.add(unmeasured(base_row(kCopyTable, "d2d", s, "D2D", "cuda", "cuda_events", 2.0 * double(s)), kNoCudaDevice));
  for (const BusMode& m : kBusModes)
    for (int64_t s : sizes)
      ctx.add(unmeasured(base_row(bus_table(m), m.name(), s, m.column(), "cuda", m.async ? "cuda_events" : "steady_clock",
                                  double(s)),
                         kNoCudaDevice));
  for (const char* column : {"serial (1 stream)", "overlapped (2 streams)"})
    ctx.add(unmeasured(base_row(kOverlapTable, column[0] == 's' ? "overlap_serial" : "overlap_two_streams", overlap_bytes,
                                column, "cuda", "steady_clock", double(overlap_bytes)),
                       kNoCudaDevice));
}

void device_rows(BenchContext& ctx, const std::vector<int64_t>& sizes) {
  const int64_t max_size = sizes.back();
  const Device gpu = Device::cuda(0);
  const auto stream = ctx.stream->handle();
  Tensor pageable_host = bytes_on(max_size, Device::cpu()), pinned_host = bytes_on(max_size, Device::cpu(), true);
  Tensor dev_a = bytes_on(max_size, gpu), dev_b = bytes_on(max_size, gpu);
  auto* pageable = static_cast<uint8_t*>(pageable_host.raw_data());
  auto* pinned = static_cast<uint8_t*>(pinned_host.raw_data());
  std::vector<uint8_t> check(static_cast<size_t>(max_size));

  for (int64_t s : sizes) {
    ctx.progress("transfers: device copies " + format_bytes(double(s)));
    // Verify before timing: a round trip through both buffers gives the pattern back.
    for (int64_t i = 0; i < s; ++i) pageable[i] = static_cast<uint8_t>(i * 7 + 3), pinned[i] = static_cast<uint8_t>(i * 5 + 1);
    cuda::runtime::memcpy(dev_a.raw_data(), pageable, size_t(s), CopyKind::HostToDevice, stream, false);
    cuda::runtime::memcpy(dev_b.raw_data(), dev_a.raw_data(), size_t(s), CopyKind::DeviceToDevice, stream, false);
    cuda::runtime::memcpy(check.data(), dev_b.raw_data(), size_t(s), CopyKind::DeviceToHost, stream, false);
    bool ok = std::memcmp(check.data(), pageable, size_t(s)) == 0;
    cuda::runtime::memcpy(dev_a.raw_data(), pinned, size_t(s), CopyKind::HostToDevice, stream, true);
    cuda::runtime::memcpy(pageable, dev_a.raw_data(), size_t(s), CopyKind::DeviceToHost, stream, true);
    cuda::runtime::stream_synchronize(stream);
    ok = ok && std::memcmp(pageable, pinned, size_t(s)) == 0;

    Row d2d = base_row(kCopyTable, "d2d", s, "D2D", "cuda", "cuda_events", 2.0 * double(s));
    if (!ok) {
      const char* what = "H2D -> D2D -> D2H round trip changed the bytes";
      ctx.fail(d2d, what);
      for (const BusMode& m : kBusModes)
        ctx.fail(base_row(bus_table(m), m.name(), s, m.column(), "cuda", m.async ? "cuda_events" : "steady_clock",
                          double(s)),
                 what);
      continue;
    }
    ctx.add(measured(d2d, sample_device([&] {
      cuda::runtime::memcpy(dev_b.raw_data(), dev_a.raw_data(), size_t(s), CopyKind::DeviceToDevice, stream, true);
    }, *ctx.stream, ctx.timing, ctx.flusher.get())));

    for (const BusMode& m : kBusModes) {
      bool h2d = m.direction[0] == 'H';
      uint8_t* host = m.pinned ? pinned : pageable;
      void* dst = h2d ? dev_a.raw_data() : static_cast<void*>(host);
      const void* src = h2d ? static_cast<const void*>(host) : dev_a.raw_data();
      CopyKind kind = h2d ? CopyKind::HostToDevice : CopyKind::DeviceToHost;
      Row row = base_row(bus_table(m), m.name(), s, m.column(), "cuda", m.async ? "cuda_events" : "steady_clock", double(s));
      auto copy = [&, dst, src, kind] { cuda::runtime::memcpy(dst, src, size_t(s), kind, stream, m.async); };
      ctx.add(measured(row, m.async ? sample_device(copy, *ctx.stream, ctx.timing, ctx.flusher.get())
                                    : sample_host(copy, ctx.timing)));
    }
  }
}

// How the overlap benchmark was cut: chunks, GEMMs a chunk, and the speedup a perfect overlap would give.
struct OverlapPlan {
  int chunks, gemms;
  double ideal;
};

void add_overlap_rows(BenchContext& ctx, int64_t total, const OverlapPlan& plan, std::vector<double> serial,
                      std::vector<double> overlapped) {
  Row serial_row = base_row(kOverlapTable, "overlap_serial", total, "serial (1 stream)", "cuda", "steady_clock", double(total));
  Row overlap_row =
      base_row(kOverlapTable, "overlap_two_streams", total, "overlapped (2 streams)", "cuda", "steady_clock", double(total));
  for (Row* r : {&serial_row, &overlap_row}) {
    r->params.push_back({"chunks", plan.chunks});
    r->params.push_back({"gemms_per_chunk", plan.gemms});
  }
  serial_row = measured(serial_row, std::move(serial));
  overlap_row = measured(overlap_row, std::move(overlapped));
  const double speedup = serial_row.stats->median / overlap_row.stats->median;
  char text[96];
  std::snprintf(text, sizeof text, "overlap %.2fx faster than serial (ideal %.2fx)", speedup, plan.ideal);
  overlap_row.extras = {{"speedup_vs_serial", speedup, text}, {"ideal_speedup", plan.ideal, ""}};
  ctx.add(serial_row);
  ctx.add(overlap_row);
}

// Each chunk's copy is followed by `gemms` 1024^3 GEMMs that wait for it; with two streams the next
// chunk's copy runs under the current chunk's GEMMs, with one they take turns.
void overlap_rows(BenchContext& ctx, int64_t total) {
  constexpr int kChunks = 8;
  const int64_t kN = ctx.emulated() ? 128 : 1024;  // the emulated device runs a 1024^3 GEMM in a minute
  const Device gpu = Device::cuda(0);
  const int64_t chunk = total / kChunks;
  ctx.progress("transfers: copy/compute overlap " + format_bytes(double(total)));
  Tensor host = bytes_on(total, Device::cpu(), true), dev = bytes_on(total, gpu);
  std::memset(host.raw_data(), 1, size_t(total));
  Tensor a = Tensor::rand({kN, kN}, 1, DType::F32, gpu), b = Tensor::rand({kN, kN}, 2, DType::F32, gpu);
  Tensor c = Tensor::empty({kN, kN}, DType::F32, gpu);
  const cuda::Stream compute = *ctx.stream, copy = *ctx.copy_stream;
  auto gemm = [&] { ops::matmul_(c, a, b, false, false); };  // on the compute stream, as every op
  auto* src = static_cast<uint8_t*>(host.raw_data());
  auto* dst = static_cast<uint8_t*>(dev.raw_data());
  auto copy_chunk = [&](int i, const cuda::Stream& s) {
    cuda::runtime::memcpy(dst + i * chunk, src + i * chunk, size_t(chunk), CopyKind::HostToDevice, s.handle(), true);
  };
  // Calibrate: as many GEMMs per chunk as take about as long as the chunk's copy.
  TimingOptions calib = ctx.timing;
  calib.min_reps = 5, calib.min_seconds = 0, calib.max_seconds = 0.5;
  double copy_s = compute_stats(sample_device([&] { copy_chunk(0, compute); }, compute, calib, nullptr)).median;
  double gemm_s = compute_stats(sample_device(gemm, compute, calib, nullptr)).median;
  const int gemms = std::clamp(static_cast<int>(copy_s / gemm_s + 0.5), 1, 64);

  std::vector<cuda::Event> arrived(kChunks);
  auto serial = [&] {
    for (int i = 0; i < kChunks; ++i) {
      copy_chunk(i, compute);
      for (int g = 0; g < gemms; ++g) gemm();
    }
    compute.synchronize();
  };
  auto overlapped = [&] {
    for (int i = 0; i < kChunks; ++i) {
      copy_chunk(i, copy);
      arrived[i].record(copy);
    }
    for (int i = 0; i < kChunks; ++i) {
      compute.wait(arrived[i]);
      for (int g = 0; g < gemms; ++g) gemm();
    }
    compute.synchronize();
    copy.synchronize();
  };
  const double ideal = (copy_s + gemms * gemm_s) / std::max(copy_s, gemms * gemm_s);
  add_overlap_rows(ctx, total, {kChunks, gemms, ideal}, sample_host(serial, ctx.timing),
                   sample_host(overlapped, ctx.timing));
}

}  // namespace

void run_transfers(BenchContext& ctx) {
  const std::vector<int64_t> sizes = transfer_sizes(ctx.quick);
  const int64_t overlap_bytes = ctx.quick ? (64 << 20) : (256 << 20);
  host_memcpy_rows(ctx, sizes);
  if (!ctx.cuda()) return unavailable_device_rows(ctx, sizes, overlap_bytes);
  device_rows(ctx, sizes);
  overlap_rows(ctx, overlap_bytes);
}

}  // namespace ember::bench

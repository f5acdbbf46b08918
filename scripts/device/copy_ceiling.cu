// The copy-engine ceilings the MPI figures are held against (docs/device-runs.md):
// GPU 0 -> GPU 1 with peer access (the NVLink path osu_bw D D takes through UCX's
// cuda_ipc), and pinned host memory <-> GPU 1 (the PCIe path of H D and D H).
// Same message size as the checks' bandwidth runs (osu_bw -m 268435456).
//
//   nvcc -O2 -o copy_ceiling copy_ceiling.cu && ./copy_ceiling
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t err_ = (call);                                                   \
    if (err_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(err_));         \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

static const size_t kBytes = size_t(256) << 20;
static const int kWarmup = 5, kIters = 20;

// GB/s (10^9 B/s) of kIters copies of kBytes on the stream of device `timer`.
static double rate(int timer, void *dst, int dst_dev, const void *src, int src_dev,
                   cudaMemcpyKind kind) {
  CHECK(cudaSetDevice(timer));
  cudaStream_t stream;
  cudaEvent_t start, stop;
  CHECK(cudaStreamCreate(&stream));
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < kWarmup + kIters; ++i) {
    if (i == kWarmup) CHECK(cudaEventRecord(start, stream));
    if (kind == cudaMemcpyDeviceToDevice)
      CHECK(cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, kBytes, stream));
    else
      CHECK(cudaMemcpyAsync(dst, src, kBytes, kind, stream));
  }
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  return double(kBytes) * kIters / (ms * 1e-3) / 1e9;
}

int main() {
  int count = 0, peer = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::fprintf(stderr, "copy_ceiling: needs 2 GPUs, found %d\n", count);
    return 1;
  }
  CHECK(cudaDeviceCanAccessPeer(&peer, 0, 1));
  void *d0, *d1, *host;
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&d0, kBytes));
  if (peer) CHECK(cudaDeviceEnablePeerAccess(1, 0));
  CHECK(cudaSetDevice(1));
  CHECK(cudaMalloc(&d1, kBytes));
  if (peer) CHECK(cudaDeviceEnablePeerAccess(0, 0));
  CHECK(cudaMallocHost(&host, kBytes));
  std::printf("peer access 0<->1: %s\n", peer ? "yes" : "no");
  std::printf("D0->D1 %.1f GB/s\n", rate(0, d1, 1, d0, 0, cudaMemcpyDeviceToDevice));
  std::printf("H->D1 %.1f GB/s\n", rate(1, d1, 1, host, -1, cudaMemcpyHostToDevice));
  std::printf("D1->H %.1f GB/s\n", rate(1, host, -1, d1, 1, cudaMemcpyDeviceToHost));
  return 0;
}

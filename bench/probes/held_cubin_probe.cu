// Probe (session 28): the library's held-slab kernel (Note [Softmax held slabs]) timed by the probes' harness instead
// of the tuner's, to tell the kernel from the harness. Session 28 (docs/PERF.md): session 27's kernel ran as slowly
// here as in the tuner (152-190 us against the split probe's 75-77), which pointed at the kernel: Nsight Compute then
// found the finals' L2 lines a hot spot (v4: 87 us here). Not part of the library.
// Session 29: the same harness timed macro variants of v5's source (held_variants.py); P, R and NB compiled in ran
// 1-2 us faster, so the library now compiles them in (softmax 13) and its kernel takes (in, out, ws); v5's sources
// also take P, R and NB, passed below as R = ceil(n / P) and NB = smem / (R x 128) (ignored by the newer kernels).
// Session 30: each cubin comes with its launch (threads, parts P, dynamic shared memory), so sources whose grid was
// edited (held_edits.py: other part sizes, a lead, a finals fetcher) are timed in the same run as the library's.
// Usage on the GPU machine (a 132-SM H200), from a checkout:
//   cudal1 source 'aten::_log_softmax(bf16[32,32000,64]{2048000,64,1}, 1, False)' \
//     --variant tile3.stats6.out8.merge4.pf0 --sm 90 --sms 132 > held6.cu
//   nvcc -arch=sm_90 -cubin -o held6.cubin held6.cu
//   nvcc -O3 -std=c++17 -arch=sm_90 -o held_cubin_probe held_cubin_probe.cu -lcuda
//   ./held_cubin_probe held6.cubin 544 128 230144 [more.cubin threads P smem ...]
// threads: (stats + out + 3) x 32 (+ 32 with held_edits.py's fetcher); P and the shared memory: the source's P, and
// NB x R x 128 + 2 x stats x 512 bytes (inner 64; the library's held_grid for 132 SMs and merge 4: P 128, R 250,
// NB 7: 230144 bytes at stats 6, 232192 at stats 8).
#include <cuda.h>

#include "column_probe.cuh"

int main(int argc, char** argv) {
  ColumnBuffers b;
  constexpr int kMaxParts = 512;
  // OUTER x P x INNER pairs, OUTER x INNER finals, then the counters and flags: 64 x OUTER words zeroed before each
  // launch, room for held_variants.py's FS 32 (a line a flag).
  float* ws;
  CK(cudaMalloc(&ws, (2ll * OUTER * kMaxParts * INNER + 2 * OUTER * INNER + 64 * OUTER) * sizeof(float)));
  for (int a = 1; a + 3 < argc; a += 4) {
    const unsigned threads = static_cast<unsigned>(std::atoi(argv[a + 1]));
    const int parts = std::atoi(argv[a + 2]), smem = std::atoi(argv[a + 3]);
    unsigned* const counters = reinterpret_cast<unsigned*>(ws + 2ll * OUTER * parts * INNER + 2 * OUTER * INNER);
    CUmodule mod;
    CUfunction fn;
    if (parts < 1 || parts > kMaxParts || cuModuleLoad(&mod, argv[a]) != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn, mod, "cudal1_softmax") != CUDA_SUCCESS ||
        cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem) != CUDA_SUCCESS) {
      std::printf("%s: cannot load\n", argv[a]);
      continue;
    }
    int p = parts, r = (NROWS + parts - 1) / parts, nb = smem / (r * INNER * 2);
    void* args[] = {&b.in, &b.out, &ws, &p, &r, &nb};
    auto zero = [&] { CK(cudaMemsetAsync(counters, 0, 64 * OUTER * sizeof(unsigned))); };
    auto launch = [&] {
      if (cuLaunchCooperativeKernel(fn, 132, 1, 1, threads, 1, 1, smem, 0, args) != CUDA_SUCCESS) std::abort();
    };
    CK(cudaMemset(b.out, 0, ELEMS * 2));
    zero();
    launch();
    CK(cudaDeviceSynchronize());
    CK(cudaMemset(b.d, 0, 4));
    max_diff<<<1024, 256>>>(b.out, b.ref, ELEMS, b.d);
    float h = -1.f;
    CK(cudaMemcpy(&h, b.d, 4, cudaMemcpyDeviceToHost));
    std::printf("%-22s (%u threads, P %d, %d B): %7.1f us, max |diff| %.4f\n", argv[a], threads, parts, smem,
                median_us(b.flush, b.sink, b.kFlushN, zero, launch), h);
    std::fflush(stdout);
  }
  return 0;
}

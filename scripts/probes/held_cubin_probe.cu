// Probe (session 28): the library's held-slab kernel (Note [Softmax held slabs]) timed by the probes' harness instead
// of the tuner's, to tell the kernel from the harness. Session 28 (docs/PERF.md): session 27's kernel ran as slowly
// here as in the tuner (152-190 us against the split probe's 75-77), which pointed at the kernel: Nsight Compute then
// found the finals' L2 lines a hot spot (v4: 87 us here). Not part of the library.
// Session 29: the same harness timed macro variants of v5's source (held_variants.py); P, R and NB compiled in ran
// 1-2 us faster, so the library now compiles them in (softmax 13) and its kernel takes (in, out, ws) only: the
// extra arguments below are then ignored.
// Usage on the GPU machine (a 132-SM H200; P, R and NB below are held_grid's for it with merge 4), from a checkout:
//   cudal1 source 'aten::_log_softmax(bf16[32,32000,64]{2048000,64,1}, 1, False)' \
//     --variant tile3.stats8.out8.merge4.pf0 --sm 90 --sms 132 > held8.cu
//   nvcc -arch=sm_90 -cubin -o held8.cubin held8.cu
//   nvcc -O3 -std=c++17 -arch=sm_90 -o held_cubin_probe held_cubin_probe.cu -lcuda
//   ./held_cubin_probe held8.cubin 608 [more.cubin threads ...]   (threads: (stats + out + 3) x 32)
#include <cuda.h>

#include "column_probe.cuh"

int main(int argc, char** argv) {
  ColumnBuffers b;
  constexpr int P = 128, R = 250, NB = 7, SMEM = NB * R * INNER * 2 + 2 * 8 * INNER * 8;
  float* ws;  // counters and flags: 64 x OUTER words zeroed, room for held_variants.py's FS 32 (a line a flag)
  CK(cudaMalloc(&ws, (2ll * OUTER * P * INNER + 2 * OUTER * INNER + 64 * OUTER) * sizeof(float)));
  unsigned* const flags = reinterpret_cast<unsigned*>(ws + 2ll * OUTER * P * INNER + 2 * OUTER * INNER);
  for (int a = 1; a + 1 < argc; a += 2) {
    CUmodule mod;
    CUfunction fn;
    if (cuModuleLoad(&mod, argv[a]) != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn, mod, "cudal1_softmax") != CUDA_SUCCESS ||
        cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, SMEM) != CUDA_SUCCESS) {
      std::printf("%s: cannot load\n", argv[a]);
      continue;
    }
    const unsigned threads = static_cast<unsigned>(std::atoi(argv[a + 1]));
    int p = P, r = R, nb = NB;
    void* args[] = {&b.in, &b.out, &ws, &p, &r, &nb};
    auto zero = [&] { CK(cudaMemsetAsync(flags, 0, 64 * OUTER * sizeof(unsigned))); };
    auto launch = [&] {
      if (cuLaunchCooperativeKernel(fn, 132, 1, 1, threads, 1, 1, SMEM, 0, args) != CUDA_SUCCESS) std::abort();
    };
    CK(cudaMemset(b.out, 0, ELEMS * 2));
    zero();
    launch();
    CK(cudaDeviceSynchronize());
    CK(cudaMemset(b.d, 0, 4));
    max_diff<<<1024, 256>>>(b.out, b.ref, ELEMS, b.d);
    float h = -1.f;
    CK(cudaMemcpy(&h, b.d, 4, cudaMemcpyDeviceToHost));
    std::printf("%s (%u threads): %7.1f us, max |diff| %.4f\n", argv[a], threads,
                median_us(b.flush, b.sink, b.kFlushN, zero, launch), h);
  }
  return 0;
}

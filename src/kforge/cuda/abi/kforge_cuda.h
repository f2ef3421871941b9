/* kforge_cuda.h: a small C ABI over kforge's native CUDA backend (libkforge_cuda.so).
 *
 * The Python worker loads the library with ctypes to compile a `cuda` kernel with NVRTC and
 * launch it on torch-allocated buffers, on torch's current stream: that is how a torch
 * reference is compared with a cuda candidate on identical inputs. Compilation, the
 * compile cache, argument marshalling from the IOContract and the launch are the same code
 * the native worker (`kforge worker cuda`) runs.
 *
 * Loading the library initialises nothing; CUDA is touched by the first
 * kforge_cuda_kernel_create, which uses the CUDA context current on the calling thread
 * (torch's), or retains device 0's primary context when there is none. NVRTC is found as
 * described in src/kforge/cuda/nvrtc_api.h (KFORGE_NVRTC_LIB first).
 *
 * Errors: every function returning int returns a kforge_cuda_status; the message (for
 * KFORGE_CUDA_ERROR_COMPILE: NVRTC's log) is kforge_cuda_last_error() on the same thread.
 * Thread-safety: a kernel handle is used by one thread at a time.
 *
 * Example (Python):
 *   lib = ctypes.CDLL(path)
 *   k = ctypes.c_void_p()
 *   if lib.kforge_cuda_kernel_create(json.dumps(request).encode(), ctypes.byref(k)) != 0:
 *       raise RuntimeError(lib.kforge_cuda_last_error().decode())
 *   ptrs = (ctypes.c_uint64 * 3)(x.data_ptr(), y.data_ptr(), out.data_ptr())
 *   lib.kforge_cuda_kernel_launch(k, ptrs, 3,
 * ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
 */
#ifndef KFORGE_CUDA_H_
#define KFORGE_CUDA_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KFORGE_CUDA_ABI_VERSION 1

typedef enum kforge_cuda_status {
  KFORGE_CUDA_OK = 0,
  KFORGE_CUDA_ERROR_INVALID_ARGUMENT = 1,  /* malformed request (JSON path in the message) */
  KFORGE_CUDA_ERROR_COMPILE = 2,           /* NVRTC rejected the source; the message is its log */
  KFORGE_CUDA_ERROR_NO_DEVICE = 3,         /* compiled, but no CUDA driver or device to run on */
  KFORGE_CUDA_ERROR_NVRTC_UNAVAILABLE = 4, /* libnvrtc not found or broken */
  KFORGE_CUDA_ERROR_CUDA = 5,              /* a CUDA driver call failed (its CUresult name) */
  KFORGE_CUDA_ERROR_INTERNAL = 6
} kforge_cuda_status;

typedef struct kforge_cuda_kernel kforge_cuda_kernel;

/* KFORGE_CUDA_ABI_VERSION of the library. */
int kforge_cuda_abi_version(void);

/* Compiles (through the on-disk cache) and loads a kernel. `request_json` is a UTF-8 JSON
 * object: the KernelCode of the REST API ({"source_code", "kernel_type": "cuda", "io",
 * "metadata": {"kernel_name", "compile_options"?}}) plus optional "cache_dir" (compile
 * cache directory), "nvrtc_library" (path of libnvrtc) and "arch" ("sm_90a"; default: the
 * device's own). On success *out is a new handle. */
int kforge_cuda_kernel_create(const char* request_json, kforge_cuda_kernel** out);

/* JSON about the compiled kernel: {"arch", "format", "cache", "compile_ms", "log",
 * "nvrtc_version", "lowered_name", "params": [{"name", "c_type", "size"}], ...}. Owned by the
 * handle. */
const char* kforge_cuda_kernel_info(const kforge_cuda_kernel* kernel);

/* Launches once on `stream` (a CUstream / cudaStream_t; NULL is the legacy default stream)
 * with the device addresses of the IOContract's tensor arguments in declared order; scalars
 * and launch dimensions come from the IOContract. Asynchronous: kernel faults are reported
 * by the next synchronisation (torch raises there). */
int kforge_cuda_kernel_launch(kforge_cuda_kernel* kernel, const uint64_t* tensor_ptrs,
                              size_t n_tensors, void* stream);

void kforge_cuda_kernel_destroy(kforge_cuda_kernel* kernel);

/* The message of the last failed call on this thread ("" if none). Valid until the next
 * call on this thread. */
const char* kforge_cuda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KFORGE_CUDA_H_ */

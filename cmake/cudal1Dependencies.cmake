# @brief Finds every dependency once (Debian packages only) and defines the imported targets the modules use.
#
# Note [CUDA at run time]
# cudal1 never links libcuda or libnvrtc: it includes their headers for types and opens the libraries with
# dlopen at run time (csrc/core/src/cuda_driver.cpp, nvrtc.cpp). A host without a driver or toolkit therefore loads
# libcudal1.so, and cudal1 turns itself off with one log line. Only the headers are needed to build.

find_package(Torch REQUIRED)
find_package(RocksDB REQUIRED)
find_package(XXHash REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)

# CUDA headers (cuda.h, nvrtc.h): types only, see Note [CUDA at run time].
find_path(CUDAL1_CUDA_INCLUDE_DIR cuda.h
  HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda
  PATH_SUFFIXES include)
find_path(CUDAL1_NVRTC_INCLUDE_DIR nvrtc.h
  HINTS "${CUDAL1_CUDA_INCLUDE_DIR}" ENV CUDA_HOME /usr/local/cuda
  PATH_SUFFIXES include)
if(NOT CUDAL1_CUDA_INCLUDE_DIR OR NOT CUDAL1_NVRTC_INCLUDE_DIR)
  message(FATAL_ERROR "cudal1 needs the CUDA headers cuda.h and nvrtc.h (CUDA 12+); set CUDA_HOME. "
                      "The libraries themselves are opened at run time and may be absent.")
endif()
add_library(cudal1_cuda_headers INTERFACE)
add_library(cudal1::cuda_headers ALIAS cudal1_cuda_headers)
target_include_directories(cudal1_cuda_headers SYSTEM INTERFACE
  "$<BUILD_INTERFACE:${CUDAL1_CUDA_INCLUDE_DIR};${CUDAL1_NVRTC_INCLUDE_DIR}>")

# Torch: the CPU part always; the torch-CUDA glue (current stream, device guard) only when this LibTorch has it.
add_library(cudal1_torch INTERFACE)
add_library(cudal1::torch ALIAS cudal1_torch)
target_link_libraries(cudal1_torch INTERFACE torch)
find_library(CUDAL1_C10_CUDA_LIBRARY c10_cuda PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
if(CUDAL1_C10_CUDA_LIBRARY AND (TARGET torch_cuda OR TARGET c10_cuda OR TORCH_CUDA_LIBRARIES))
  set(CUDAL1_TORCH_CUDA ON)
  # torch_cuda holds the CUDA generator cudal1 draws verification inputs from.
  find_library(CUDAL1_TORCH_CUDA_LIBRARY torch_cuda PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
  target_link_libraries(cudal1_torch INTERFACE "${CUDAL1_C10_CUDA_LIBRARY}" "${CUDAL1_TORCH_CUDA_LIBRARY}")
  target_compile_definitions(cudal1_torch INTERFACE CUDAL1_TORCH_CUDA=1)
  message(STATUS "cudal1: LibTorch ${Torch_VERSION} with CUDA: torch-CUDA glue compiled in")
else()
  set(CUDAL1_TORCH_CUDA OFF)
  message(STATUS "cudal1: LibTorch ${Torch_VERSION} without CUDA: torch-CUDA glue compiled out "
                 "(NVRTC and Driver API code still builds)")
endif()

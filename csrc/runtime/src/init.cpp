/// @brief The load-time initializer of libcudal1.so (Note [Activation] in runtime.cpp).
#include "runtime.h"

namespace {
// Runs when the library is loaded (linked or LD_PRELOADed), after LibTorch's own initializers (a dependency),
// so every ATen operator schema is registered by then.
__attribute__((constructor)) void cudal1_load() { cudal1::runtime::start_from_environment(); }
}  // namespace

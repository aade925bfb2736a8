#pragma once
// The CUDA runtime calls that core/stream.cpp and core/pinned_pool.cpp
// need, declared without CUDA headers so that those files compile in every
// build; defined in stream.cu and pinned_pool.cu, which only CUDA builds
// compile. Callers guard with #ifdef LT_WITH_CUDA. Handles are the
// cudaStream_t / cudaEvent_t bits; every call throws lt::Error on failure.
#include <cstddef>

namespace lt::cuda {

void* stream_create(int device, int priority);  // non-blocking, priority clamped
// Synchronizes and destroys; errors are ignored (it may run at exit, after
// the CUDA context is gone).
void stream_destroy(int device, void* stream) noexcept;
void stream_synchronize(int device, void* stream);
bool stream_query(int device, void* stream);

void* event_create(int device, bool timing, bool blocking_sync);
void event_destroy(int device, void* event) noexcept;
void event_record(void* event, int device, void* stream);
void stream_wait_event(int device, void* stream, void* event);
void event_synchronize(void* event);
bool event_query(void* event);
float event_elapsed_ms(void* start, void* end);

// Page-locked host memory, usable by every device (cudaHostAllocPortable);
// nullptr when the system cannot pin more.
void* pinned_alloc(size_t bytes);
void pinned_free(void* ptr) noexcept;
// Page-locks memory allocated elsewhere (a shared-memory segment) for
// every device (cudaHostRegisterPortable), and undoes it.
void host_register(void* ptr, size_t bytes);
void host_unregister(void* ptr) noexcept;

}  // namespace lt::cuda

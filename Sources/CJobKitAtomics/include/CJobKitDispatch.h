// What JobKit uses of libdispatch without Swift's `DispatchQueue`: a job hands each task it
// starts itself to a worker thread with `dispatch_async_f`, a function and a context pointer,
// where `DispatchQueue.async` copies a block (an allocation) around a Swift closure, straight to
// libdispatch's global queue of the task's class (`dispatch_get_global_queue`), where a queue of
// its own would add a second hand-off (a concurrent queue redirects each item to its global
// queue), since Swift's `DispatchQueue` on Linux does not expose its C queue: two libdispatch
// symbols in all.
//
// libdispatch's declarations are restated with plain pointers under names of JobKit's own (each
// bound to libdispatch's symbol), so that no dispatch header is needed (the toolchain's is not on
// a C target's include path on Linux) and none can clash with them. The functions are inline, as
// the atomics are. libdispatch is linked with Foundation on every platform JobKit supports.
#ifndef CJOBKITDISPATCH_H
#define CJOBKITDISPATCH_H

#if defined(__APPLE__)
#define CJOBKIT_DISPATCH_SYMBOL(name) __asm__("_" name)
#else
#define CJOBKIT_DISPATCH_SYMBOL(name) __asm__(name)
#endif

#pragma clang assume_nonnull begin

extern void *cjobkit_dispatch_get_global_queue(long identifier, unsigned long flags)
  CJOBKIT_DISPATCH_SYMBOL("dispatch_get_global_queue");
extern void cjobkit_dispatch_async_f(void *queue, void *context, void (*work)(void *_Nullable))
  CJOBKIT_DISPATCH_SYMBOL("dispatch_async_f");

/// libdispatch's global concurrent queue of quality-of-service class `qos` (a `qos_class_t`
/// value; 0 for the default queue). Never freed.
static inline void *cjobkit_global_queue(unsigned int qos) {
  return cjobkit_dispatch_get_global_queue((long)qos, 0);
}

/// `dispatch_async_f(queue, context, work)`: runs `work(context)` on one of `queue`'s threads.
static inline void cjobkit_queue_async(void *queue, void *context, void (*work)(void *_Nullable)) {
  cjobkit_dispatch_async_f(queue, context, work);
}

#pragma clang assume_nonnull end

#endif

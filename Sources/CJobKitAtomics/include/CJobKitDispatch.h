// What JobKit uses of libdispatch without Swift's `DispatchQueue`: a job hands each task it
// starts itself to a worker thread with `dispatch_async_f`, a function and a context pointer,
// where `DispatchQueue.async` copies a block (an allocation) around a Swift closure. The queues
// are made here too (`dispatch_queue_create`, with `DISPATCH_QUEUE_CONCURRENT` and
// `dispatch_queue_attr_make_with_qos_class`), since Swift's `DispatchQueue` on Linux does not
// expose its C queue: four libdispatch symbols in all.
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

struct cjobkit_dispatch_queue_attr_s;
/// `DISPATCH_QUEUE_CONCURRENT`.
extern struct cjobkit_dispatch_queue_attr_s cjobkit_dispatch_queue_attr_concurrent
  CJOBKIT_DISPATCH_SYMBOL("_dispatch_queue_attr_concurrent");
extern void *cjobkit_dispatch_queue_attr_make_with_qos_class(void *attr, unsigned int qos_class, int relative_priority)
  CJOBKIT_DISPATCH_SYMBOL("dispatch_queue_attr_make_with_qos_class");
extern void *cjobkit_dispatch_queue_create(const char *label, void *attr) CJOBKIT_DISPATCH_SYMBOL("dispatch_queue_create");
extern void cjobkit_dispatch_async_f(void *queue, void *context, void (*work)(void *_Nullable))
  CJOBKIT_DISPATCH_SYMBOL("dispatch_async_f");

/// A new concurrent dispatch queue labelled `label`, of quality-of-service class `qos` (a
/// `qos_class_t` value; 0 for none). Never freed: the caller keeps it for the process's life.
static inline void *cjobkit_concurrent_queue_create(const char *label, unsigned int qos) {
  void *attr = &cjobkit_dispatch_queue_attr_concurrent;
  if (qos != 0) {
    attr = cjobkit_dispatch_queue_attr_make_with_qos_class(attr, qos, 0);
  }
  return cjobkit_dispatch_queue_create(label, attr);
}

/// `dispatch_async_f(queue, context, work)`: runs `work(context)` on one of `queue`'s threads.
static inline void cjobkit_queue_async(void *queue, void *context, void (*work)(void *_Nullable)) {
  cjobkit_dispatch_async_f(queue, context, work);
}

#pragma clang assume_nonnull end

#endif

/// Stores `newValue` in `value` and returns the value it replaced.
///
/// How every JobKit setter and transition replaces a value the user gave (a closure, a handler, a
/// context or its values, a clock, a queue) under a lock: the replaced value is returned out of
/// the lock, and the caller releases it there. Its last reference may be a user's object whose
/// `deinit` runs user code, possibly calling back into the same JobKit object, which must never
/// happen while JobKit holds a lock:
///
/// ```swift
/// let replaced = state.withLock { exchange(&$0.onDrained, with: newValue) }
/// _ = replaced  // released after the lock
/// ```
func exchange<Value>(_ value: inout Value, with newValue: Value) -> Value {
  let old = value
  value = newValue
  return old
}

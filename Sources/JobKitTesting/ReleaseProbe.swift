import Foundation

/// A value whose `deinit` calls a closure you give it: proof that JobKit releases what you hand
/// it (closures, handlers, context values, tasks) outside its locks.
///
/// JobKit's locks are not recursive. If JobKit dropped the last reference to a probe while
/// holding a lock, the probe's closure, calling back into the same JobKit object, would deadlock
/// on that thread and ``released`` would never open. Capture the probe in whatever you hand to
/// JobKit, let JobKit drop it, and wait for ``released`` with a timeout:
///
/// ```swift
/// let queue = CommandQueue()
/// let probe = ReleaseProbe { _ = queue.isPaused }   // calls back into the queue
/// let released = probe.released
/// queue.onDrained { [probe] in _ = probe }
/// queue.onDrained {}                                  // replacing the handler drops the probe
/// #expect(await released.waitOpen(timeout: 10))
/// ```
///
/// The closure runs once, on the thread that dropped the last reference, before ``released``
/// opens. It must not capture the probe itself.
public final class ReleaseProbe: Sendable {
  /// Opens once the probe was released and its closure returned.
  public let released = Latch()
  private let onRelease: @Sendable () -> Void

  /// Creates a probe that calls `onRelease` when it is released.
  public init(onRelease: @escaping @Sendable () -> Void = {}) {
    self.onRelease = onRelease
  }

  deinit {
    onRelease()
    released.open()
  }
}

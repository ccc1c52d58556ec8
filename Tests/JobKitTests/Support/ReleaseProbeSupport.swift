import Foundation
import JobKit
import JobKitTesting

extension ContextKey where Value == ReleaseProbe {
  static let releaseProbe = ContextKey("releaseProbe")
}

/// Runs `body` on a thread of its own and returns at once. For the step that makes JobKit drop a
/// ``ReleaseProbe``: if JobKit released it under a lock, the probe's call back into the same
/// object deadlocks that thread only (no libdispatch worker, no test thread), and the test sees
/// `released.waitOpen(timeout:)` return `false`.
func onOwnThread(_ body: @escaping @Sendable () -> Void) {
  Thread { body() }.start()
}

internal import CJobKitAtomics
import Foundation

extension ConcurrentOperation {
  // Change notifications: never called with a lock held.

  func postExecutingChange(inQueue: Bool) {
    #if !canImport(Darwin)
      // corelibs Foundation has no KVO: this change only moves Foundation's own state of the
      // operation to executing, which its queue reads (a cancel of an operation not executing
      // makes the queue look for ready operations again). An operation in no queue has no queue
      // to tell, and nothing else reads that state for a `ConcurrentOperation`, which answers
      // `isExecuting` and `isFinished` itself.
      guard inQueue else { return }
    #endif
    willChangeValue(forKey: "isExecuting")
    didChangeValue(forKey: "isExecuting")
  }

  /// Posts the finish's change notifications; only once the state says finished.
  func postFinishChange() {
    whilePostingFinish {
      #if canImport(Darwin)
        willChangeValue(forKey: "isFinished")
        willChangeValue(forKey: "isExecuting")
        didChangeValue(forKey: "isExecuting")
        didChangeValue(forKey: "isFinished")
      #else
        // corelibs Foundation has no KVO (its `willChangeValue` does nothing, and neither can be
        // overridden): `didChangeValue` only drives its own bookkeeping, where "isExecuting" moves
        // the operation to executing if it executes, which a finished one no longer does.
        didChangeValue(forKey: "isFinished")
      #endif
    }
  }

  /// Runs `body` with the operation marked as the one whose finish this thread posts: its
  /// `isFinished`, which Foundation (and KVO's observers, on Darwin) read back inside the
  /// notifications, is `true` there with no lock. Only after the state said finished, which
  /// never changes back. The mark is the thread's own (a C thread-local, so no data race); a post
  /// nested inside `body` (an observer finishing another operation) marks that one meanwhile.
  func whilePostingFinish(_ body: () -> Void) {
    let outer = cjobkit_exchange_finish_posting(UInt(bitPattern: ObjectIdentifier(self)))
    body()
    _ = cjobkit_exchange_finish_posting(outer)
  }

  /// Whether this thread is inside ``whilePostingFinish(_:)`` for this operation (and no nested
  /// post for another one).
  var isPostingFinish: Bool {
    cjobkit_finish_posting() == UInt(bitPattern: ObjectIdentifier(self))
  }
}

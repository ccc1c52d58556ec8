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

  func postFinishChange() {
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

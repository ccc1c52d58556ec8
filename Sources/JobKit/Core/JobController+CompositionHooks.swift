import Foundation

/// The one hook `Composition` needs from the core, kept here so the core's own files stay as they are.
extension JobController {
  /// Adds the job to `queue` unless ``startJob()`` or ``run()`` already submitted it or it already
  /// started: the same check ``run()`` makes, without reporting ``JobKitError/Code/startedTwice``.
  /// Used by `runAndWait()`, which must not report a misuse for a job the caller already started.
  func submitUnlessSubmitted(to queue: OperationQueue) {
    let needsSubmission = jobState.withLock { $0.submit() } && !isExecuting && !isFinished
    if needsSubmission {
      queue.addOperation(self)
    }
  }
}

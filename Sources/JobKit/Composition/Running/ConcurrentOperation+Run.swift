import Foundation

/// An operation that decides itself how ``ConcurrentOperation/runAndWait()`` and `run()` submit it
/// (a job keeps its own record of `startJob`; a pipeline, of `finally`).
protocol SelfSubmitting: ConcurrentOperation {
  /// Adds the operation to ``JobController/sharedJobQueue`` unless JobKit already queued it or it
  /// already started.
  func submitSelfOnce()
}

extension JobController: SelfSubmitting {
  func submitSelfOnce() {
    queueOnce(to: Self.sharedJobQueue)
  }
}

extension ConcurrentOperation {
  /// The first half of every `run()` and `runAndWait()`: adds the operation to
  /// ``JobController/sharedJobQueue`` unless JobKit already queued it (a job's `trackAndQueue`,
  /// `startJob`, `finally`, an earlier `run()`) or it already started. JobKit cannot see an
  /// `addOperation` made by other code.
  func queueOnce() {
    if let submitting = self as? any SelfSubmitting {
      submitting.submitSelfOnce()
    } else if claimQueue() {
      JobController.sharedJobQueue.addOperation(self)
    }
  }
}

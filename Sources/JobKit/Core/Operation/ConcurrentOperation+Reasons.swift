/// How a job records why an operation stops (`OperationState.cancellationReason`): the first
/// reason a cancel or a failing stop records, except that a failing stop the job's state
/// recorded replaces a cancel's (see `OperationState.recordFailingStop`). Each takes the
/// operation's lock once and releases the reason it did not keep after it.
extension ConcurrentOperation {
  /// Records `reason` (if there is none yet) and returns the reason the operation stops with:
  /// what a job hands down to the tasks it cancels.
  func adoptCancellationReason(_ reason: (any Error)?) -> any Error {
    let (unused, current): ((any Error)?, (any Error)?) = state.withLock { state in
      let unused = reason.flatMap { state.recordCancellationReason($0) }
      return (unused, state.cancellationReason)
    }
    _ = unused  // released after the lock
    return current ?? CancellationError()
  }

  /// A job's failing stop was recorded with `error`: records it as the reason, replacing one a
  /// cancel wrote before the stop (see `recordFailingStop`). Returns `error`, the reason the
  /// job hands down to what it cancels.
  func adoptFailingStop(_ error: any Error) -> any Error {
    let replaced = state.withLock { $0.recordFailingStop(error) }
    _ = replaced  // released after the lock
    return error
  }

  /// The reason recorded, and whether a job's failing stop recorded it, in one read.
  var recordedReason: (reason: (any Error)?, isFailure: Bool) {
    state.withLock { ($0.cancellationReason, $0.isFailureReason) }
  }
}

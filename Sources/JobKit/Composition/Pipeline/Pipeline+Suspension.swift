/// Between two steps: a cancel stops the pipeline, a suspension pauses it.
extension Pipeline: PipelineCheckpoint {
  /// Reads the cancel recorded by ``ConcurrentOperation`` (which `cancel()` records before it
  /// returns): a `cancel()` that returned before a step's checkpoint keeps that step from
  /// running, even while its call of ``operationCancelled()`` waits for
  /// ``operationStart()`` to return. Returns whether the pipeline is suspended
  /// (``ConcurrentOperation/suspend()``): the next step then waits (`waitUntilResumed()`); the
  /// running step went on. Both are read under one lock.
  func checkpoint() throws -> Bool {
    let (cancelled, suspended) = cancelAndSuspension
    if cancelled {
      throw CancellationError()
    }
    return suspended
  }

  /// Waits for ``ConcurrentOperation/resume()``, or a cancel (which cancels the pipeline's Swift
  /// task): then the pipeline ends cancelled.
  func waitUntilResumed() async throws {
    repeat {
      await waitWhileSuspended()
      // Woken by the Swift task's cancel rather than a resume: the pipeline ends cancelled.
      try Task.checkCancellation()
    } while try checkpoint()
  }
}

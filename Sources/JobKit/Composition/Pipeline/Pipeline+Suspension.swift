/// Between two steps (issue 20): a cancel stops the pipeline, a suspension pauses it.
extension Pipeline: PipelineCheckpoint {
  /// Reads the cancel recorded by ``ConcurrentOperation`` (which `cancel()` records before it
  /// returns): a `cancel()` that returned before a step's checkpoint keeps that step from
  /// running, even while its delivery to ``operationCancelled()`` waits for
  /// ``operationStart()`` to return. While the pipeline is suspended
  /// (``ConcurrentOperation/suspend()``), the next step waits for ``ConcurrentOperation/resume()``
  /// (or a cancel, which cancels the pipeline's Swift task); the running step goes on.
  func checkpoint() async throws {
    while true {
      let (cancelled, suspended) = cancelAndSuspension
      if cancelled {
        throw CancellationError()
      }
      guard suspended else { return }
      await waitWhileSuspended()
      // Woken by the Swift task's cancel rather than a resume: the pipeline ends cancelled.
      try Task.checkCancellation()
    }
  }
}

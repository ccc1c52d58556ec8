import Foundation

extension ConcurrentOperation {
  /// The queue ``runAndWait()`` starts operations on: concurrent, shared, owned by JobKit.
  private static let runAndWaitQueue: OperationQueue = {
    let queue = OperationQueue()
    queue.name = "JobKit.runAndWait"
    return queue
  }()

  /// Starts the operation if it has not started, blocks the calling thread until it finished,
  /// then throws its ``error``, or `CancellationError` if it was cancelled without an error: for
  /// tests and command-line scripts.
  ///
  /// A ``JobController`` (a group, for example) is submitted to
  /// ``JobController/sharedJobQueue`` unless ``JobController/startJob()`` or
  /// ``JobController/run()`` already submitted it; any other operation is added to a private
  /// concurrent queue unless it is executing or finished. Do not call it for an operation you
  /// added to a queue yourself: JobKit cannot see that, and Foundation treats adding an operation
  /// to a second queue as a fatal error. Call `waitUntilFinished()` then.
  ///
  /// The calling thread blocks, so never call it from one of the operation's own callbacks, from
  /// a job's `main()` or callbacks, from a thread the operation needs to finish, or from async code
  /// (use ``JobController/run()`` or ``waitForFinish()`` there).
  @available(*, noasync, message: "blocks the calling thread; use run() or waitForFinish() in async code")
  public func runAndWait() throws {
    if let job = self as? JobController {
      job.submitUnlessSubmitted(to: JobController.sharedJobQueue)
    } else if !isExecuting && !isFinished {
      ConcurrentOperation.runAndWaitQueue.addOperation(self)
    }
    waitUntilFinished()
    try throwOutcome()
  }
}

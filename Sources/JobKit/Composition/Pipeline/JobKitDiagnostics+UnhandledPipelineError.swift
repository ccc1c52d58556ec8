import Foundation

/// Where a ``Pipeline`` failure that nothing handles goes (BlockSequence's default error block,
/// which logged `Sequence named >> NAME << error: ERROR`).
extension JobKitDiagnostics {
  /// A function that receives the error of a pipeline whose failure nothing handles, and that
  /// pipeline (a `Pipeline<Output>`; read its `name` or cast it).
  public typealias UnhandledPipelineErrorHandler = @Sendable (_ error: any Error, _ pipeline: Operation) -> Void

  private static let unhandledPipelineErrorStorage = LockedBox<UnhandledPipelineErrorHandler>(
    defaultUnhandledPipelineErrorHandler)

  /// The default: reports the failure as a ``JobKitError/Code/unhandledPipelineError`` with the
  /// message `Pipeline named >> NAME << error: ERROR`, through the usual misuse channel: it is
  /// appended to the pipeline's ``ConcurrentOperation/misuses`` and passed to
  /// ``misuseHandler`` (by default one line on standard error), or to the pipeline's own handler
  /// set with ``setMisuseHandler(_:for:)``.
  public static let defaultUnhandledPipelineErrorHandler: UnhandledPipelineErrorHandler = { error, pipeline in
    let name = pipeline.name ?? "(unnamed)"
    let message = "Pipeline named >> \(name) << error: \(error)"
    if let pipeline = pipeline as? ConcurrentOperation {
      pipeline.reportMisuse(.unhandledPipelineError, message)
    } else {
      report(JobKitError(.unhandledPipelineError, message: message), for: pipeline)
    }
  }

  /// Called once for each ``Pipeline`` failure that nothing handles, in place of the
  /// ``Pipeline/onError(_:)`` handler it lacks: in the pipeline's Swift task right after the
  /// failing step threw (on the step queue if it has one), with no JobKit lock held, before the
  /// pipeline finishes. The pipeline still finishes with the error as its
  /// ``ConcurrentOperation/error``. By default ``defaultUnhandledPipelineErrorHandler``; set it to
  /// route these failures to your logger. Setting it is thread-safe and applies to failures
  /// after the assignment.
  ///
  /// A failure counts as **handled**, and this is not called, when the step throws and
  /// - the pipeline has an ``Pipeline/onError(_:)`` handler, which is called instead; or
  /// - ``Pipeline/run()`` or ``ConcurrentOperation/runAndWait()`` was called on it before the
  ///   step threw (also after ``Pipeline/finally(_:)`` started it): they throw the error to
  ///   their caller; or
  /// - a ``JobController`` tracks it: the job sees the failure in its callbacks and, by its
  ///   ``JobController/failurePolicy``, in its ``JobController/failures`` (a group collects it
  ///   and fails with ``JobFailures``); or
  /// - a ``ConcurrentOperation/waitForFinish()`` is suspended on it at that moment.
  ///
  /// A cancel is not a failure, and is never reported. JobKit cannot see other ways of reading
  /// the error: a `waitForFinish()` that begins after the step threw, or a pipeline you added to
  /// a queue yourself and whose `error` you read in its `completionBlock`. Give such a pipeline
  /// an ``Pipeline/onError(_:)`` handler (`.onError { _ in }` marks the failure handled).
  public static var unhandledPipelineErrorHandler: UnhandledPipelineErrorHandler {
    get { unhandledPipelineErrorStorage.withLock { $0 } }
    set {
      var replaced = newValue
      unhandledPipelineErrorStorage.withLock { swap(&$0, &replaced) }
      // `replaced`, the previous handler, is released here, after the lock.
    }
  }
}

extension Pipeline {
  /// The steps failed and the pipeline has no error handler, and neither `run()` nor
  /// `runAndWait()` awaits it: unless a job or a `waitForFinish()` observes it, the failure is
  /// unhandled (see ``JobKitDiagnostics/unhandledPipelineErrorHandler``). No lock is held.
  func reportUnhandledFailure(_ error: any Error) {
    guard !isObservedToFinish else { return }
    JobKitDiagnostics.unhandledPipelineErrorHandler(error, self)
  }
}

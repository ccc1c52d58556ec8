/// The codes a ``Pipeline`` reports, declared with it (the core knows nothing of pipelines).
extension JobKitError.Code {
  /// A `Pipeline` is a spent builder: `then` was already called on it, which moved its steps to
  /// the pipeline `then` returned. Starting the spent builder, or building on it with `then`,
  /// gives a pipeline that runs no step and fails with this code.
  public static let spentBuilder = Self(name: "spentBuilder")
  /// `then` or `onError` was called on a `Pipeline` that had already been started (by
  /// `finally`, `run()`, a queue or a job). The started pipeline is not changed; the pipeline
  /// the call returned runs no step and fails with this code.
  public static let modifiedAfterStart = Self(name: "modifiedAfterStart")
  /// A `Pipeline` failed and nothing handled the failure: it had no `onError` handler, was not
  /// awaited with `run()` or `runAndWait()`, and no job tracked it and no `waitForFinish()` was
  /// suspended on it when the step threw. Reported by the default
  /// `JobKitDiagnostics.unhandledPipelineErrorHandler`, with BlockSequence's message
  /// `Pipeline named >> NAME << error: ERROR`.
  public static let unhandledPipelineError = Self(name: "unhandledPipelineError")
}

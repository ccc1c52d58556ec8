import Foundation

/// The cancellation handler: called once for a pipeline that ends cancelled.
extension Pipeline {
  /// Sets the handler called, once, if the pipeline ends cancelled (replacing an earlier
  /// handler), and returns this pipeline: CompositeOperations' and BlockSequence's cancellation
  /// handler.
  ///
  /// The pipeline ends cancelled when `cancel()` came before its steps ended, or when a step
  /// cancelled itself by throwing `CancellationError` (see the type's documentation). The
  /// handler is called instead of ``finally(_:)``'s and ``onError(_:)``'s: in the pipeline's
  /// Swift task right after the step that was running ended (on the step queue if you chose
  /// one), or, for a pipeline cancelled before it started, on the thread its queue starts it on;
  /// always before the pipeline finishes. On a started pipeline, returns a new pipeline with this
  /// handler that runs no step and fails with ``JobKitError/Code/modifiedAfterStart``.
  public func onCancelled(_ handler: @escaping @Sendable () -> Void) -> Pipeline<Output> {
    setCancelHandler(PipelineHandler(queue: nil, body: { _ in handler() }))
  }

  /// Like ``onCancelled(_:)``, but the handler runs on `queue` (asynchronously); the pipeline
  /// finishes after it returned.
  public func onCancelled(on queue: DispatchQueue, _ handler: @escaping @Sendable () -> Void) -> Pipeline<Output> {
    setCancelHandler(PipelineHandler(queue: queue, body: { _ in handler() }))
  }

  private func setCancelHandler(_ handler: PipelineHandler<Void>) -> Pipeline<Output> {
    setHandler(\.cancelHandler, in: \.cancel, to: handler, afterStart: PipelineState<Output>.cancelHandlerAfterStart)
  }
}

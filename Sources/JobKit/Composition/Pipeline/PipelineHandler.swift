import Dispatch

/// One of a pipeline's handlers (`onError` or `finally`) and the context it runs on.
struct PipelineHandler<Value: Sendable>: Sendable {
  /// The queue the handler runs on, or `nil` to run it in the pipeline's Swift task, right after
  /// the last step.
  let queue: DispatchQueue?
  let body: @Sendable (Value) -> Void

  /// Calls `body` with `value`, then `next`, both on `queue` (asynchronously) or, without a queue,
  /// on the calling thread before returning.
  func call(with value: Value, then next: @escaping @Sendable () -> Void) {
    if let queue {
      queue.async {
        body(value)
        next()
      }
    } else {
      body(value)
      next()
    }
  }

  /// Calls `handler` if there is one (see ``call(with:then:)``), otherwise just `next` on the
  /// calling thread.
  static func call(_ handler: Self?, with value: Value, then next: @escaping @Sendable () -> Void) {
    if let handler {
      handler.call(with: value, then: next)
    } else {
      next()
    }
  }
}

/// The handlers a pipeline hands on to the pipeline `then` returns: `onError`'s and
/// `onCancelled`'s (`finally`'s is set only when the pipeline is started).
struct PipelineHandlers: Sendable {
  var error: PipelineHandler<any Error>?
  var cancel: PipelineHandler<Void>?
}

import Foundation

extension JobController {
  /// Tracks `work` and adds it to ``taskQueue``; when it finished, `completion` is called with
  /// its ``Work/result`` instead of ``taskFinished(_:)``, serially with the job's other callbacks
  /// (routed like ``trackAndQueue(_:completion:)``).
  ///
  /// The argument label keeps the call unambiguous: `trackAndQueue(work) { task in … }` still
  /// hands the closure the task itself.
  ///
  /// ```swift
  /// trackAndQueue(resultOf: Work { try listDirectory(path) }) { result in
  ///     if case .success(let entries) = result { visit(entries) }
  /// }
  /// ```
  public func trackAndQueue<Output>(
    resultOf work: Work<Output>,
    completion: @escaping @Sendable (Result<Output, any Error>) -> Void
  ) {
    trackAndQueue(work) { (finished: Work<Output>) in
      completion(finished.result ?? .failure(finished.error ?? CancellationError()))
    }
  }
}
